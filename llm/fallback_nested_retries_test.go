package llm_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

// A Fallback used as another's primary has already retried and switched
// through its clients when it fails; the outer one must not retry that
// whole chain (Tries) on top: a down model is called Tries times, not
// Tries squared, before the outer fallback answers.
func TestFallbackNestedDoesNotMultiplyRetries(t *testing.T) {
	a := &stubModel{name: "a", always: errDown}
	b := &stubModel{name: "b", always: errDown}
	c := &stubModel{name: "c"}
	quiet := slog.New(slog.DiscardHandler)
	inner := newFallback(t, llm.FallbackConfig{Primary: a, Fallbacks: []llm.Client{b}, RetryDelay: time.Nanosecond, Logger: quiet})
	outer := newFallback(t, llm.FallbackConfig{Primary: inner, Fallbacks: []llm.Client{c}, RetryDelay: time.Nanosecond, Logger: quiet})
	r, err := outer.Complete(context.Background(), llm.Request{})
	if err != nil || r.Model != "c" {
		t.Fatalf("answer %v %v, want c", r, err)
	}
	if a.Calls() != llm.DefaultFallbackTries || b.Calls() != llm.DefaultFallbackTries {
		t.Fatalf("a called %d times, b %d, want %d each", a.Calls(), b.Calls(), llm.DefaultFallbackTries)
	}
}
