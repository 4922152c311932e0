package llmhttp

import (
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
)

// LimitedBody reads through a limit and closes the body it wraps.
type LimitedBody struct {
	io.Reader
	io.Closer
}

// CapErrorBody cuts the body of res, when it is an error answer (4xx,
// 5xx), at max bytes: the SDKs read such bodies whole themselves, before
// the client sees them. It returns res and err as they are otherwise. A
// client's SDK middleware calls it on what the next handler returned.
func CapErrorBody(res *http.Response, err error, max int64) (*http.Response, error) {
	if err == nil && res != nil && res.Body != nil && res.StatusCode >= 400 {
		res.Body = LimitedBody{Reader: io.LimitReader(res.Body, max), Closer: res.Body}
	}
	return res, err
}

// ReadErrorBody reads at most max bytes of the body of an error answer,
// ignoring a read error (the start is only used for the message), and
// closes it.
func ReadErrorBody(res *http.Response, max int64) []byte {
	b, _ := io.ReadAll(io.LimitReader(res.Body, max))
	res.Body.Close()
	return b
}

// ReadBody reads a whole reply body, reading no more than max bytes (and
// one byte to know it was passed); past max it fails with tooLarge.
func ReadBody(r io.Reader, max int64, tooLarge error) ([]byte, error) {
	n := max
	if n < math.MaxInt64 {
		n++
	}
	body, err := io.ReadAll(io.LimitReader(r, n))
	if err == nil && int64(len(body)) > max {
		return nil, tooLarge
	}
	return body, err
}

// Scrub replaces every one of secrets in s by REDACTED, in order.
func Scrub(s string, secrets []string) string {
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, "REDACTED")
	}
	return s
}

// Redacted prints a secret of a configuration: `""` when it is empty (so
// that a missing key shows), REDACTED otherwise.
func Redacted(s string) string {
	if s == "" {
		return `""`
	}
	return "REDACTED"
}

// HeaderNames lists the names of h only, sorted, as "[A B]": their values
// may be credentials.
func HeaderNames(h map[string]string) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	return "[" + strings.Join(names, " ") + "]"
}
