package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/valetkit/valet/llm"
)

const (
	querySecret  = "SECRETVALUE123"
	headerSecret = "AZUREHEADERSECRET42"
	tokenSecret  = "TOKENVALUE999"
	plainHeader  = "my-app-title"
)

// chainSecrets walks the whole chain of err (Unwrap() error and Unwrap()
// []error) and reports every node whose %v, %+v or %#v shows a secret.
func chainSecrets(err error, secrets []string) []string {
	var found []string
	var walk func(e error, depth int)
	walk = func(e error, depth int) {
		if e == nil || depth > 50 {
			return
		}
		for _, verb := range []string{"%v", "%+v", "%#v"} {
			s := fmt.Sprintf(verb, e)
			for _, sec := range secrets {
				if strings.Contains(s, sec) || strings.Contains(s, url.QueryEscape(sec)) {
					found = append(found, fmt.Sprintf("%T (%s): %s", e, verb, s))
				}
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap(), depth+1)
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x, depth+1)
			}
		}
	}
	walk(err, 0)
	return found
}

func secretConfig(base string) Config {
	return Config{
		APIKey:  testKey,
		BaseURL: base,
		Headers: map[string]string{"api-key": headerSecret, "X-Custom-Token": tokenSecret, "X-Title": plainHeader},
	}
}

func allSecrets(cfg Config) []string {
	s := []string{querySecret, cfg.APIKey}
	for _, v := range cfg.Headers {
		s = append(s, v)
	}
	return s
}

// TestNoSecretInErrorChain: a credential in the BaseURL query (Azure's
// ?api-key=), the API key and header values appear nowhere in the chain of
// an error the client returns, while *url.Error and net.Error stay
// reachable with errors.As.
func TestNoSecretInErrorChain(t *testing.T) {
	const query = "?api-version=2024-10-21&api-key=" + querySecret
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(cut.Close)

	cases := []struct {
		name, base string
		refused    bool
	}{
		{"refused", "http://127.0.0.1:1/openai/deployments/x" + query, true},
		{"connection closed", cut.URL + "/openai/deployments/x" + query, false},
	}
	for _, tc := range cases {
		cfg := secretConfig(tc.base)
		c := New(cfg)
		calls := map[string]func() error{
			"Complete": func() error { _, err := c.Complete(t.Context(), userReq("hi")); return err },
			"Stream":   func() error { _, err := llm.Collect(c.Stream(t.Context(), userReq("hi"))); return err },
		}
		for call, do := range calls {
			t.Run(tc.name+"/"+call, func(t *testing.T) {
				err := do()
				if llm.KindOf(err) != llm.KindUnavailable {
					t.Fatalf("%v: kind %v", err, llm.KindOf(err))
				}
				for _, leak := range chainSecrets(err, allSecrets(cfg)) {
					t.Errorf("secret in the error chain: %s", leak)
				}
				var ue *url.Error
				if !errors.As(err, &ue) {
					t.Fatalf("no *url.Error in %v", err)
				}
				if !strings.Contains(ue.URL, "api-key=REDACTED") || !strings.Contains(ue.URL, "api-version=2024-10-21") {
					t.Errorf("url.Error URL %q", ue.URL)
				}
				var ne net.Error
				if !errors.As(err, &ne) {
					t.Errorf("no net.Error in %v", err)
				}
				if tc.refused && !errors.Is(err, syscall.ECONNREFUSED) {
					t.Errorf("errors.Is(ECONNREFUSED) lost: %v", err)
				}
			})
		}
		if got := c.BaseURL(); strings.Contains(got, querySecret) || !strings.Contains(got, "api-key=REDACTED") {
			t.Errorf("BaseURL() = %q", got)
		}
	}
}

// TestNoSecretMalformedBaseURL: a BaseURL that does not parse is reported
// by the first call, without its credentials.
func TestNoSecretMalformedBaseURL(t *testing.T) {
	cfg := secretConfig("http://127.0.0.1:notaport/v1?api-version=2024-10-21&api-key=" + querySecret)
	c := New(cfg)
	_, err1 := c.Complete(t.Context(), userReq("hi"))
	_, err2 := llm.Collect(c.Stream(t.Context(), userReq("hi")))
	for _, err := range []error{err1, err2} {
		if err == nil {
			t.Fatal("no error")
		}
		for _, leak := range chainSecrets(err, allSecrets(cfg)) {
			t.Errorf("secret in the error chain: %s", leak)
		}
	}
	for _, s := range []string{c.BaseURL(), cfg.String(), cfg.LogValue().String()} {
		if strings.Contains(s, querySecret) {
			t.Errorf("secret in %q", s)
		}
	}
}

type timeoutErr struct{ msg string }

func (e *timeoutErr) Error() string   { return e.msg }
func (e *timeoutErr) Timeout() bool   { return true }
func (e *timeoutErr) Temporary() bool { return false }

// TestScrubErrChain: joined and wrapped errors are scrubbed node by node,
// and keep what errors.Is and errors.As find in them.
func TestScrubErrChain(t *testing.T) {
	cfg := secretConfig("https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21&api-key=" + querySecret)
	c := New(cfg)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	in := errors.Join(
		fmt.Errorf("reading: %w", &url.Error{Op: "Post", URL: cfg.BaseURL, Err: refused}),
		&timeoutErr{"slow gateway said " + headerSecret},
		fmt.Errorf("token %s: %w", tokenSecret, io.ErrUnexpectedEOF),
	)
	out := c.scrubErr(in)
	for _, leak := range chainSecrets(out, allSecrets(cfg)) {
		t.Errorf("secret in the error chain: %s", leak)
	}
	var ue *url.Error
	var ne net.Error
	var op *net.OpError
	if !errors.As(out, &ue) || !strings.Contains(ue.URL, "api-key=REDACTED") {
		t.Errorf("*url.Error lost: %v", out)
	}
	if !errors.As(out, &op) || !errors.Is(out, syscall.ECONNREFUSED) || !errors.Is(out, io.ErrUnexpectedEOF) {
		t.Errorf("causes lost: %v", out)
	}
	var te *scrubbedNetError
	if !errors.As(out, &te) || !te.Timeout() || !errors.As(te, &ne) {
		t.Errorf("timeout lost: %v", out)
	}
	if clean := errors.New("plain"); c.scrubErr(clean) != clean {
		t.Error("a clean error is rebuilt")
	}
}

// TestNoSecretInCancelCause: the cause of a cancelled ctx is part of the
// returned chain, scrubbed too.
func TestNoSecretInCancelCause(t *testing.T) {
	cfg := secretConfig("http://127.0.0.1:1/v1?api-key=" + querySecret)
	c := New(cfg)
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(fmt.Errorf("shutting down client with key %s", testKey))
	_, err := c.Complete(ctx, userReq("hi"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	for _, leak := range chainSecrets(err, allSecrets(cfg)) {
		t.Errorf("secret in the error chain: %s", leak)
	}
}
