package mcptool

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
)

// A streamable HTTP server: tools listed and called, the Header sent with
// every request.
func TestHTTPServer(t *testing.T) {
	hs := newHTTPServer(t)
	s := connect(t, Server{Name: "h", URL: hs.URL, Header: http.Header{"Authorization": {"Bearer s3cret"}}}, Config{})
	reg := registry(t, s)
	if res := run(reg, "h_echo", `{"text":"over http"}`); res.Content != "echo: over http" {
		t.Fatalf("echo: %+v", res)
	}
	if got := (*hs.headers.Load()).Get("Authorization"); got != "Bearer s3cret" {
		t.Fatalf("Authorization %q", got)
	}
	if res := run(reg, "h_delete_all", `{}`); !errors.Is(res.Err, ErrToolFailed) {
		t.Fatalf("isError over http: %+v", res)
	}
}

// A server restarted behind the same URL no longer knows the session:
// the call that finds out goes through on a new session (the server never
// saw it on the old one), and later calls keep working. A client that
// kept the stale session would fail every call from here on.
func TestHTTPStaleSessionStartsNewOne(t *testing.T) {
	hs := newHTTPServer(t)
	s := connect(t, Server{Name: "h", URL: hs.URL}, Config{})
	reg := registry(t, s)
	if res := run(reg, "h_echo", `{"text":"one"}`); res.IsError {
		t.Fatal(res.Content)
	}
	old := s.sess
	hs.Restart()
	res := run(reg, "h_echo", `{"text":"two"}`)
	if res.IsError && !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("the first call after the restart: %+v", res)
	}
	for _, text := range []string{"three", "four"} {
		if res := run(reg, "h_echo", `{"text":"`+text+`"}`); res.Content != "echo: "+text {
			t.Fatalf("a later call: %+v", res)
		}
	}
	if s.sess == old {
		t.Fatal("still on the stale session")
	}
}

// A server that is gone gives error results, never a hang, and Tools
// says it is unavailable.
func TestHTTPServerGone(t *testing.T) {
	hs := newHTTPServer(t)
	s := connect(t, Server{Name: "h", URL: hs.URL}, Config{})
	reg := registry(t, s)
	hs.CloseClientConnections()
	hs.Close()
	res := run(reg, "h_echo", `{"text":"x"}`)
	if !res.IsError || !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("a call to a gone server: %+v", res)
	}
	if _, err := s.Tools(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Tools: %v", err)
	}
	if strings.Contains(res.Content, "s3cret") {
		t.Fatal("secret in the result")
	}
}
