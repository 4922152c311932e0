package anthropic

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

// serve returns a client for a server answering every request with handler.
func serve(t *testing.T, handler http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return New(Config{APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
}

var hi = llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}

func TestErrorKindsFromAnthropicErrors(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		header      map[string]string
		body        string
		kind        llm.ErrorKind
		code        string
		retryAfter  time.Duration
		limit, used int
	}{
		{name: "overloaded", status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`,
			kind: llm.KindUnavailable, code: "overloaded_error"},
		{name: "rate limit", status: 429, header: map[string]string{"retry-after": "17"},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (x) of 50,000 input tokens per minute."}}`,
			kind: llm.KindRateLimited, code: "rate_limit_error", retryAfter: 17 * time.Second},
		{name: "prompt too long", status: 400,
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}`,
			kind: llm.KindContextOverflow, code: "invalid_request_error", limit: 200000, used: 208310},
		{name: "request too large", status: 413, body: `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`,
			kind: llm.KindContextOverflow, code: "request_too_large"},
		{name: "auth", status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			kind: llm.KindAuth, code: "authentication_error"},
		{name: "permission", status: 403, body: `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`,
			kind: llm.KindAuth, code: "permission_error"},
		{name: "billing", status: 400, body: `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."}}`,
			kind: llm.KindAuth, code: "billing_error"},
		{name: "bad request", status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages.1.content.0.type: Expected 'text'"}}`,
			kind: llm.KindBadRequest, code: "invalid_request_error"},
		{name: "not found", status: 404, body: `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`,
			kind: llm.KindBadRequest, code: "not_found_error"},
		{name: "api error", status: 500, body: `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`,
			kind: llm.KindUnavailable, code: "api_error"},
		{name: "timeout", status: 504, body: `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`,
			kind: llm.KindTimeout, code: "timeout_error"},
		{name: "HTML 502", status: 502, header: map[string]string{"Content-Type": "text/html"},
			body: "<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>",
			kind: llm.KindUnavailable},
		{name: "HTML 429 without a content type", status: 429, body: "<!DOCTYPE html><html><body>Too many</body></html>",
			kind: llm.KindRateLimited},
		{name: "empty 503", status: 503, kind: llm.KindUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				fmt.Fprint(w, tc.body)
			})
			for _, stream := range []bool{false, true} {
				var err error
				if stream {
					_, err = llm.Collect(c.Stream(t.Context(), hi))
				} else {
					_, err = c.Complete(t.Context(), hi)
				}
				var e *llm.Error
				if !errors.As(err, &e) {
					t.Fatalf("stream=%v: %#v is not an *llm.Error", stream, err)
				}
				if e.Kind != tc.kind || e.Code != tc.code || e.StatusCode != tc.status || e.RetryAfter != tc.retryAfter ||
					e.ContextLimit != tc.limit || e.ContextUsed != tc.used || e.Message == "" {
					t.Errorf("stream=%v: %+v", stream, e)
				}
				if strings.HasPrefix(tc.body, "<") && (!strings.Contains(e.Message, "non-JSON") || strings.Contains(e.Message, "<")) {
					t.Errorf("stream=%v: an HTML page is described, not pasted: %q", stream, e.Message)
				}
			}
		})
	}
}

// An error event inside a stream is classified by its type.
func TestStreamErrorEvent(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n")
		fmt.Fprint(w, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n")
	})
	_, err := llm.Collect(c.Stream(t.Context(), hi))
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindUnavailable || e.Code != "overloaded_error" || e.StatusCode != 529 {
		t.Fatalf("%#v", err)
	}
}

// The API key never appears in an error, even when the server echoes it.
func TestAPIKeyNotInErrors(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("x-api-key") != testKey {
			t.Errorf("x-api-key = %q", r.Header.Get("x-api-key"))
		}
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key %s"}}`, testKey)
	})
	_, err := c.Complete(t.Context(), hi)
	if llm.KindOf(err) != llm.KindAuth || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "REDACTED") {
		t.Fatalf("%v", err)
	}
	cfg := Config{APIKey: testKey, BaseURL: "https://proxy-user:" + testKey + "@proxy.example/anthropic?sig=" + testKey}
	if s := cfg.String() + fmt.Sprint(cfg); strings.Contains(s, testKey) {
		t.Errorf("Config prints its key: %s", s)
	}
}
