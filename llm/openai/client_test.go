package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

func userReq(text string) llm.Request {
	return llm.Request{Messages: []llm.Message{llm.UserMessage(text)}}
}

// serve returns a client for a server answering every request with handler.
func serve(t *testing.T, handler http.HandlerFunc) *Client {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return New(Config{APIKey: testKey, BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
}

func sse(w http.ResponseWriter, payloads ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, p := range payloads {
		fmt.Fprintf(w, "data: %s\n\n", p)
	}
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

const textChunk = `{"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`

func TestStreamCancelledMidStream(t *testing.T) {
	release := make(chan struct{})
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sse(w, textChunk)
		select { // hang until the client goes away
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var got []string
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch, e := range c.Stream(ctx, userReq("hi")) {
			if e != nil {
				err = e
				return
			}
			got = append(got, ch.Text)
			cancel() // cancel while the server is still streaming
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a failsafe, not a timing assertion
		t.Fatal("stream did not return after its context was cancelled")
	}
	if len(got) != 1 || got[0] != "Hel" {
		t.Errorf("text before cancel: %q", got)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not wrap context.Canceled", err)
	}
	if llm.IsRetryable(err) {
		t.Error("a cancelled call is not retryable")
	}
}

func TestCompleteCancelled(t *testing.T) {
	release := make(chan struct{})
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) })
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err := c.Complete(ctx, userReq("hi"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v does not wrap context.Canceled", err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = c.Complete(ctx, userReq("hi"))
	if llm.KindOf(err) != llm.KindTimeout || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v (kind %v)", err, llm.KindOf(err))
	}
}

// closeRecorder records whether response bodies were closed.
type closeRecorder struct {
	next   http.RoundTripper
	closed atomic.Int32
}

func (cr *closeRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := cr.next.RoundTrip(r)
	if res != nil {
		res.Body = &recordedBody{ReadCloser: res.Body, n: &cr.closed}
	}
	return res, err
}

type recordedBody struct {
	io.ReadCloser
	n *atomic.Int32
}

func (b *recordedBody) Close() error { b.n.Add(1); return b.ReadCloser.Close() }

func TestStreamEarlyBreakClosesBody(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sse(w, textChunk, textChunk, textChunk)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	rec := &closeRecorder{next: srv.Client().Transport}
	c := New(Config{BaseURL: srv.URL, HTTPClient: &http.Client{Transport: rec}})
	n := 0
	for ch, err := range c.Stream(t.Context(), userReq("hi")) {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if ch.Text != "Hel" {
			t.Fatalf("chunk %+v", ch)
		}
		break
	}
	if n != 1 {
		t.Fatalf("%d chunks", n)
	}
	if rec.closed.Load() == 0 {
		t.Fatal("breaking out of the range did not close the response body")
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvAPIKey, "")
	t.Setenv(EnvBaseURL, "")
	t.Setenv(EnvModel, "")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), "OPENAI_API_KEY") {
		t.Fatalf("missing key: %v", err)
	}
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		var body struct{ Model string }
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`, body.Model)
	}))
	defer srv.Close()
	t.Setenv(EnvAPIKey, "sk-env")
	t.Setenv(EnvBaseURL, srv.URL+"/v1")
	t.Setenv(EnvModel, "my-model")
	c, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if c.Model() != "my-model" {
		t.Errorf("model %q", c.Model())
	}
	resp, err := c.Complete(t.Context(), userReq("hi"))
	if err != nil || resp.Model != "my-model" || auth != "Bearer sk-env" {
		t.Fatalf("%v %+v auth=%q", err, resp, auth)
	}
	srv.Client().CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
}

func TestNewDefaultsAndNoEnv(t *testing.T) {
	t.Setenv(EnvAPIKey, "sk-from-env-must-not-be-sent")
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Values("Authorization")
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	c := New(Config{BaseURL: srv.URL, HTTPClient: srv.Client()})
	if c.Model() != DefaultModel {
		t.Errorf("model %q", c.Model())
	}
	if _, err := c.Complete(t.Context(), userReq("hi")); err != nil {
		t.Fatal(err)
	}
	if len(auth) != 0 {
		t.Errorf("Authorization %q sent with no API key configured", auth)
	}
}

func TestConfigPrintsNoSecrets(t *testing.T) {
	cfg := Config{APIKey: "sk-secret", Headers: map[string]string{"api-key": "azure-secret"}, Model: "m"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("cfg", "config", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), logged.String()} {
		if strings.Contains(s, "secret") {
			t.Errorf("secret printed: %s", s)
		}
		if !strings.Contains(s, "REDACTED") {
			t.Errorf("no REDACTED in %s", s)
		}
	}
}

// TestArgumentsNormalised feeds replies no recording has: arguments as a
// JSON object, empty, invalid; missing and duplicate ids.
func TestArgumentsNormalised(t *testing.T) {
	const completion = `{"id":"x","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"Let me check.",
		"reasoning_content":"thinking","tool_calls":[
		{"type":"function","function":{"name":"a","arguments":{"city":"Paris","days":2}}},
		{"id":"call_0","type":"function","function":{"name":"b","arguments":""}},
		{"id":"","type":"function","function":{"name":"c","arguments":"{\"x\": [1, 2]}"}},
		{"id":"call_0","type":"function","function":{"name":"d","arguments":"not json"}},
		{"id":"e1","type":"function","function":{"name":"e","arguments":"\"{\\\"y\\\":1}\""}},
		{"id":"f1","type":"function","function":{"name":"f"}}]}}],
		"usage":{"prompt_tokens":"7","completion_tokens":3.0,"total_tokens":10},"extra":{"vendor":true}}`
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion)
	})
	resp, err := c.Complete(t.Context(), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	want := []wantCall{
		{"call_1", "a", `{"city":"Paris","days":2}`}, // call_0 is taken by a later call
		{"call_0", "b", `{}`},
		{"call_2", "c", `{"x":[1,2]}`},
		{"call_3", "d", `{"_raw_arguments":"not json"}`}, // a repeated id is replaced
		{"e1", "e", `{"y":1}`},                           // encoded twice
		{"f1", "f", `{}`},
	}
	checkReply(t, 0, resp, &wantReply{Text: "Let me check.", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}, Calls: want})
	if err := llm.CheckPairing(append([]llm.Message{resp.Message}, toolResults(resp.Message)...)); err != nil {
		t.Fatalf("generated ids do not pair: %v", err)
	}

	// The same in a stream: an object sent whole, calls without index, a
	// usage chunk with choices, repeated finish reasons, no [DONE].
	c = serve(t, func(w http.ResponseWriter, r *http.Request) {
		sse(w,
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}`,
			`{"choices":[]}`,
			`{"choices":[{"index":0,"delta":{"content":"check."}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"a","arguments":{"city":"Paris","days":2}}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_0","function":{"name":"b","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"name":"c","arguments":"{\"x\": "}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"arguments":"[1, 2]}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}`,
		)
	})
	var text strings.Builder
	resp = nil
	for ch, err := range c.Stream(t.Context(), userReq("hi")) {
		if err != nil {
			t.Fatal(err)
		}
		text.WriteString(ch.Text)
		if ch.Response != nil {
			resp = ch.Response
		}
	}
	if resp == nil || text.String() != "Let me check." {
		t.Fatalf("text %q, response %+v", text.String(), resp)
	}
	checkReply(t, 0, resp, &wantReply{Text: "Let me check.", Finish: "tool_calls", Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}, Calls: want[:3]})
}

func toolResults(m llm.Message) []llm.Message {
	var out []llm.Message
	for _, c := range m.ToolCalls {
		out = append(out, llm.ToolResultMessage(c, "ok", false))
	}
	return out
}

func TestStreamEndings(t *testing.T) {
	cases := []struct {
		name string
		body string
		kind llm.ErrorKind // KindUnknown: success
		code string
	}{
		{"truncated before finish", "data: " + textChunk + "\n\n", llm.KindUnavailable, ""},
		{"garbage chunk", "data: {\"choices\":[{\"ind\n\n", llm.KindUnavailable, ""},
		{"event error without error key", "event: error\ndata: {\"message\":\"overloaded\",\"type\":\"server_error\"}\n\n", llm.KindUnavailable, ""},
		{"inline overflow", "data: {\"error\":{\"message\":\"This model's maximum context length is 8192 tokens\",\"code\":null}}\n\n", llm.KindContextOverflow, ""},
		{"inline rate limit", ": keepalive\n\ndata: {\"error\":{\"message\":\"slow down\",\"code\":429}}\n\n", llm.KindRateLimited, "429"},
		{"crlf framing", "data: " + textChunk + "\r\n\r\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n", llm.KindUnknown, ""},
		{"multi-line data", "data: {\"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"Hel\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", llm.KindUnknown, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, tc.body)
			})
			resp, err := llm.Collect(c.Stream(t.Context(), userReq("hi")))
			if tc.kind == llm.KindUnknown {
				if err != nil || resp.Message.Content != "Hel" {
					t.Fatalf("%v %+v", err, resp)
				}
				return
			}
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != tc.kind || e.Code != tc.code {
				t.Fatalf("got %#v, want kind %v code %q", err, tc.kind, tc.code)
			}
		})
	}
}

func TestStreamAnsweredWithJSON(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"whole"},"finish_reason":"stop"}]}`)
	})
	resp, err := llm.Collect(c.Stream(t.Context(), userReq("hi")))
	if err != nil || resp.Message.Content != "whole" {
		t.Fatalf("%v %+v", err, resp)
	}
}

func TestClassify(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	cases := []struct {
		name   string
		status int
		header map[string]string
		body   string
		kind   llm.ErrorKind
		code   string
		retry  time.Duration // checked when non-zero; -1 checks a date-derived value
	}{
		{"retry-after seconds", 429, map[string]string{"Retry-After": "7"}, `{"error":{"message":"x","code":"rate_limit_exceeded"}}`, llm.KindRateLimited, "rate_limit_exceeded", 7 * time.Second},
		{"retry-after-ms wins", 429, map[string]string{"Retry-After": "7", "Retry-After-Ms": "1500"}, `{"error":{"message":"x"}}`, llm.KindRateLimited, "", 1500 * time.Millisecond},
		{"retry-after date", 429, map[string]string{"Retry-After": date}, `{}`, llm.KindRateLimited, "", -1},
		{"insufficient quota", 429, nil, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`, llm.KindAuth, "insufficient_quota", 0},
		{"payment required", 402, nil, `{"error":{"message":"Insufficient Balance"}}`, llm.KindAuth, "", 0},
		{"forbidden", 403, nil, `{"error":{"message":"no access"}}`, llm.KindAuth, "", 0},
		{"request timeout", 408, nil, ``, llm.KindTimeout, "", 0},
		{"gateway timeout html", 504, nil, `<html>504 Gateway Time-out</html>`, llm.KindTimeout, "", 0},
		{"bad gateway", 502, nil, `upstream error`, llm.KindUnavailable, "", 0},
		{"overloaded 529", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, llm.KindUnavailable, "", 0},
		{"not found", 404, nil, `{"error":{"message":"The model does not exist","code":"model_not_found"}}`, llm.KindBadRequest, "model_not_found", 0},
		{"vllm overflow", 400, nil, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens","type":"BadRequestError","code":400}`, llm.KindContextOverflow, "400", 0},
		{"deepseek overflow", 400, nil, `{"error":{"message":"This model's maximum context length is 65536 tokens. However, you requested 70000 tokens","type":"invalid_request_error","code":"invalid_request_error"}}`, llm.KindContextOverflow, "invalid_request_error", 0},
		{"ollama overflow", 400, nil, `{"error":"prompt is too long"}`, llm.KindContextOverflow, "", 0},
		{"too many tokens 413", 413, nil, `{"error":{"message":"Request too large","code":"rate_limit_exceeded"}}`, llm.KindContextOverflow, "rate_limit_exceeded", 0},
		{"fastapi detail", 422, nil, `{"detail":[{"msg":"field required"}]}`, llm.KindBadRequest, "", 0},
		{"plain 400", 400, nil, `{"error":{"message":"Invalid 'messages[1].tool_call_id'","code":null}}`, llm.KindBadRequest, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := serve(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := c.Complete(t.Context(), userReq("hi"))
			var e *llm.Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v", err, err)
			}
			if e.Kind != tc.kind || e.Code != tc.code || e.StatusCode != tc.status || e.Message == "" {
				t.Errorf("got kind=%v code=%q status=%d msg=%q; want kind=%v code=%q status=%d", e.Kind, e.Code, e.StatusCode, e.Message, tc.kind, tc.code, tc.status)
			}
			switch {
			case tc.retry == -1:
				if e.RetryAfter < 80*time.Second || e.RetryAfter > 91*time.Second {
					t.Errorf("retry after %v from an HTTP date 90s ahead", e.RetryAfter)
				}
			case tc.retry != 0 && e.RetryAfter != tc.retry:
				t.Errorf("retry after %v, want %v", e.RetryAfter, tc.retry)
			}
		})
	}
}

func TestTransportErrors(t *testing.T) {
	// Connection refused: a port nothing listens on.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := New(Config{APIKey: testKey, BaseURL: "http://" + addr + "/v1"})
	_, err = c.Complete(t.Context(), userReq("hi"))
	if llm.KindOf(err) != llm.KindUnavailable || strings.Contains(err.Error(), testKey) {
		t.Fatalf("refused: %v (kind %v)", err, llm.KindOf(err))
	}

	// A connection cut before any answer.
	c = serve(t, func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	_, err = c.Complete(t.Context(), userReq("hi"))
	if llm.KindOf(err) != llm.KindUnavailable {
		t.Fatalf("cut: %v (kind %v)", err, llm.KindOf(err))
	}

	// An HTTP client timeout.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c = New(Config{BaseURL: srv.URL, HTTPClient: &http.Client{Timeout: 20 * time.Millisecond}})
	_, err = c.Complete(t.Context(), userReq("hi"))
	if llm.KindOf(err) != llm.KindTimeout {
		t.Fatalf("client timeout: %v (kind %v)", err, llm.KindOf(err))
	}
}

func TestAPIKeyScrubbedFromErrors(t *testing.T) {
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s","code":"invalid_api_key"}}`, testKey)
	})
	_, err := c.Complete(t.Context(), userReq("hi"))
	if llm.KindOf(err) != llm.KindAuth || strings.Contains(err.Error(), testKey) || !strings.Contains(err.Error(), "REDACTED") {
		t.Fatalf("%v", err)
	}
}

// TestRequestMapping checks the request body for every llm.Request field.
func TestRequestMapping(t *testing.T) {
	var bodies []map[string]any
	var paths []string
	handler := func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		bodies = append(bodies, m)
		paths = append(paths, r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}
	srv := httptest.NewServer(http.HandlerFunc(handler))
	defer srv.Close()
	temp := 0.25
	base := llm.Request{
		Model:       "override",
		Temperature: &temp,
		MaxTokens:   99,
		Tools:       []llm.ToolSpec{weatherTool, {Name: "no_params"}},
		Messages: []llm.Message{
			llm.SystemMessage("sys"),
			llm.UserMessage("u"),
			llm.AssistantMessage("thinking aloud", llm.ToolCall{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}, llm.ToolCall{ID: "c2", Name: "no_params"}),
			{Role: llm.RoleTool, ToolCallID: "c1", Name: "get_weather", Content: "sunny"},
			{Role: llm.RoleTool, ToolCallID: "c2", Name: "no_params", Content: "failed", IsError: true},
			llm.AssistantMessage("done"),
		},
	}
	// "api.openai.com" is dialled to the test server, to see max_completion_tokens.
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
	}
	openaiHC := &http.Client{Transport: &http.Transport{DialContext: dial}}
	defer openaiHC.CloseIdleConnections()
	clients := []*Client{
		New(Config{BaseURL: srv.URL + "/v1?api-version=2024-10-21", HTTPClient: srv.Client()}),
		New(Config{BaseURL: "http://api.openai.com/v1", HTTPClient: openaiHC}),
	}
	for i, choice := range []llm.ToolChoice{llm.ToolChoiceAuto, llm.ToolChoiceNone, llm.ToolChoiceRequired, "get_weather"} {
		req := base
		req.ToolChoice = choice
		if _, err := clients[i%2].Complete(t.Context(), req); err != nil {
			t.Fatal(err)
		}
	}
	if paths[0] != "/v1/chat/completions?api-version=2024-10-21" || paths[1] != "/v1/chat/completions?" {
		t.Errorf("paths %q", paths)
	}
	wantChoice := []any{nil, "none", "required", map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}
	for i, b := range bodies {
		if fmt.Sprint(b["tool_choice"]) != fmt.Sprint(wantChoice[i]) {
			t.Errorf("tool_choice %v, want %v", b["tool_choice"], wantChoice[i])
		}
		if b["model"] != "override" || b["temperature"] != 0.25 {
			t.Errorf("model %v temperature %v", b["model"], b["temperature"])
		}
		field, other := "max_tokens", "max_completion_tokens"
		if i%2 == 1 {
			field, other = other, field
		}
		if b[field] != 99.0 || b[other] != nil {
			t.Errorf("request %d: %s=%v %s=%v", i, field, b[field], other, b[other])
		}
		if _, ok := b["stream"]; ok {
			t.Errorf("stream sent by Complete")
		}
	}
	got, _ := json.Marshal(bodies[0]["messages"])
	want := `[{"content":"sys","role":"system"},{"content":"u","role":"user"},` +
		`{"content":"thinking aloud","role":"assistant","tool_calls":[` +
		`{"function":{"arguments":"{\"city\":\"Paris\"}","name":"get_weather"},"id":"c1","type":"function"},` +
		`{"function":{"arguments":"{}","name":"no_params"},"id":"c2","type":"function"}]},` +
		`{"content":"sunny","role":"tool","tool_call_id":"c1"},{"content":"failed","role":"tool","tool_call_id":"c2"},` +
		`{"content":"done","role":"assistant"}]`
	if string(got) != want {
		t.Errorf("messages\n got %s\nwant %s", got, want)
	}
	tools, _ := json.Marshal(bodies[0]["tools"])
	wantTools := `[{"function":{"description":"Current weather for a city","name":"get_weather","parameters":{"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"}},"type":"function"},` +
		`{"function":{"name":"no_params","parameters":{"properties":{},"type":"object"}},"type":"function"}]`
	if string(tools) != wantTools {
		t.Errorf("tools\n got %s\nwant %s", tools, wantTools)
	}

	// A request that cannot be expressed fails before any I/O.
	n := len(bodies)
	_, err := clients[0].Complete(t.Context(), llm.Request{Messages: []llm.Message{{Role: "narrator", Content: "x"}}})
	if llm.KindOf(err) != llm.KindBadRequest || len(bodies) != n {
		t.Errorf("unknown role: %v", err)
	}
	_, err = clients[0].Complete(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage("x")}, Tools: []llm.ToolSpec{{Name: "t", Parameters: json.RawMessage(`[1]`)}}})
	if llm.KindOf(err) != llm.KindBadRequest || len(bodies) != n {
		t.Errorf("bad schema: %v", err)
	}
}

func TestBaseURLAndModelAccessors(t *testing.T) {
	c := New(Config{})
	if c.BaseURL() != DefaultBaseURL || c.Model() != DefaultModel {
		t.Fatalf("defaults: %q %q", c.BaseURL(), c.Model())
	}
	c = New(Config{BaseURL: "http://localhost:11434/v1", Model: "llama3.1"})
	if c.BaseURL() != "http://localhost:11434/v1" || c.Model() != "llama3.1" {
		t.Fatalf("set: %q %q", c.BaseURL(), c.Model())
	}
}
