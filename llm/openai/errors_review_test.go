package openai

import (
	"net/http"
	"testing"
	"time"
)

// TestRetryAfterHuge: a server asking for an absurdly long wait must not
// produce a negative (or zero) RetryAfter, which the loop would ignore and
// retry at once.
func TestRetryAfterHuge(t *testing.T) {
	now := time.Now()
	for _, h := range []http.Header{
		{"Retry-After": {"1e300"}},
		{"Retry-After": {"Inf"}},
		{"Retry-After": {"+Infinity"}},
		{"Retry-After": {"99999999999999"}},
		{"Retry-After-Ms": {"1e300"}},
		{"Retry-After-Ms": {"Inf"}},
	} {
		if d := retryAfter(h, now); d <= 0 {
			t.Errorf("%v: retry after %v, want a large positive wait", h, d)
		}
	}
	for _, h := range []http.Header{
		{"Retry-After": {"NaN"}},
		{"Retry-After": {"-5"}},
		{"Retry-After": {"soon"}},
		{"Retry-After-Ms": {"NaN"}},
		{"Retry-After-Ms": {"-Inf"}},
	} {
		if d := retryAfter(h, now); d != 0 {
			t.Errorf("%v: retry after %v, want 0", h, d)
		}
	}
}
