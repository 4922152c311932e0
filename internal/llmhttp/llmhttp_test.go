package llmhttp

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

var errTooLarge = errors.New("too large")

func TestReadBodyFailsPastTheCap(t *testing.T) {
	if b, err := ReadBody(strings.NewReader("12345"), 5, errTooLarge); err != nil || string(b) != "12345" {
		t.Fatalf("at the cap: %q, %v; want the whole body", b, err)
	}
	if _, err := ReadBody(strings.NewReader("123456"), 5, errTooLarge); !errors.Is(err, errTooLarge) {
		t.Fatalf("past the cap: %v; want %v", err, errTooLarge)
	}
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

func TestCapErrorBodyCutsOnlyErrorAnswers(t *testing.T) {
	for _, tc := range []struct {
		status int
		want   string
	}{{200, "0123456789"}, {429, "0123"}, {500, "0123"}} {
		body := &closeCounter{Reader: strings.NewReader("0123456789")}
		res, _ := CapErrorBody(&http.Response{StatusCode: tc.status, Body: body}, nil, 4)
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if string(b) != tc.want || body.closed != 1 {
			t.Errorf("status %d: read %q, closed %d times; want %q, closed once", tc.status, b, body.closed, tc.want)
		}
	}
}

func TestReadErrorBodyReadsTheStartAndCloses(t *testing.T) {
	body := &closeCounter{Reader: strings.NewReader("0123456789")}
	if b := ReadErrorBody(&http.Response{StatusCode: 400, Body: body}, 3); string(b) != "012" || body.closed != 1 {
		t.Fatalf("read %q, closed %d times; want \"012\", closed once", b, body.closed)
	}
}

func TestScrubRedactsEverySecret(t *testing.T) {
	got := Scrub("key sk-abc and pw hunter2, sk-abc again", []string{"sk-abc", "hunter2"})
	if want := "key REDACTED and pw REDACTED, REDACTED again"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestConfigPrintingHidesValues(t *testing.T) {
	if got := Redacted(""); got != `""` {
		t.Errorf(`Redacted("") = %s, want ""`, got)
	}
	if got := Redacted("sk-abc"); got != "REDACTED" {
		t.Errorf("Redacted(key) = %s, want REDACTED", got)
	}
	if got := HeaderNames(map[string]string{"x-b": "secret", "X-A": "v"}); got != "[X-A x-b]" {
		t.Errorf("HeaderNames = %s, want [X-A x-b]", got)
	}
}
