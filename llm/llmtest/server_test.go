package llmtest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// weatherTools is the tools array of the requests below.
var weatherTools = []any{map[string]any{
	"type": "function",
	"function": map[string]any{
		"name":        "get_weather",
		"description": "Current weather for a city",
		"parameters":  map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	},
}}

func newServer(t *testing.T, model llm.Client, opts ...llmtest.ServerOption) *llmtest.Server {
	t.Helper()
	srv := llmtest.NewServer(model, opts...)
	t.Cleanup(srv.Close)
	return srv
}

// post sends body (encoded to JSON unless it is a string) to the chat
// endpoint. Header pairs are added as given.
func post(t *testing.T, srv *llmtest.Server, body any, header ...string) *http.Response {
	t.Helper()
	resp, err := tryPost(context.Background(), srv, body, header...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func tryPost(ctx context.Context, srv *llmtest.Server, body any, header ...string) (*http.Response, error) {
	var b []byte
	if s, ok := body.(string); ok {
		b = []byte(s)
	} else {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/chat/completions", bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return srv.Client().Do(req)
}

func decode[T any](t *testing.T, resp *http.Response) T {
	t.Helper()
	var v T
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return v
}

// apiErr is OpenAI's error body; Param and Code are null when nil.
type apiErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// wantError checks status and error body; code "" means null.
func wantError(t *testing.T, resp *http.Response, status int, typ, code, msgPart string) apiErr {
	t.Helper()
	if resp.StatusCode != status {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, status, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	if resp.Header.Get("x-request-id") == "" {
		t.Error("no x-request-id")
	}
	e := decode[apiErr](t, resp)
	if e.Error.Type != typ {
		t.Errorf("type = %q, want %q", e.Error.Type, typ)
	}
	switch {
	case code == "" && e.Error.Code != nil:
		t.Errorf("code = %q, want null", *e.Error.Code)
	case code != "" && (e.Error.Code == nil || *e.Error.Code != code):
		t.Errorf("code = %v, want %q", e.Error.Code, code)
	}
	if !strings.Contains(e.Error.Message, msgPart) {
		t.Errorf("message = %q, want it to contain %q", e.Error.Message, msgPart)
	}
	return e
}

// completion is the part of chat.completion the tests check, with
// content and arguments kept raw to see their JSON types.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			Refusal   json.RawMessage `json:"refusal"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string          `json:"name"`
					Arguments json.RawMessage `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func TestServerToolRoundTrip(t *testing.T) {
	model := llmtest.NewScript(
		llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("get_weather", `{"city":"Paris"}`)}, Usage: llm.Usage{InputTokens: 50, OutputTokens: 7}},
		llmtest.Text("It is sunny in Paris."),
	)
	srv := newServer(t, model)
	msgs := []any{
		map[string]any{"role": "system", "content": "You are Koi."},
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "Weather in Paris?"}}},
	}
	resp := post(t, srv, map[string]any{"model": "gpt-4o-mini", "messages": msgs, "tools": weatherTools, "tool_choice": "auto", "temperature": 0.2, "max_completion_tokens": 100})
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	c := decode[completion](t, resp)
	if c.Object != "chat.completion" || !strings.HasPrefix(c.ID, "chatcmpl-") || c.Created == 0 || c.Model != "gpt-4o-mini" || len(c.Choices) != 1 {
		t.Fatalf("completion = %+v", c)
	}
	ch := c.Choices[0]
	if ch.FinishReason != "tool_calls" || ch.Message.Role != "assistant" || string(ch.Message.Content) != "null" || string(ch.Message.Refusal) != "null" {
		t.Errorf("choice = %+v (content %s)", ch, ch.Message.Content)
	}
	if len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v", ch.Message.ToolCalls)
	}
	call := ch.Message.ToolCalls[0]
	if call.ID == "" || call.Type != "function" || call.Function.Name != "get_weather" || string(call.Function.Arguments) != `"{\"city\":\"Paris\"}"` {
		t.Errorf("tool call = %+v, arguments %s", call, call.Function.Arguments)
	}
	if c.Usage.PromptTokens != 50 || c.Usage.CompletionTokens != 7 || c.Usage.TotalTokens != 57 {
		t.Errorf("usage = %+v", c.Usage)
	}

	// Second turn: answer the call.
	var args string
	_ = json.Unmarshal(call.Function.Arguments, &args)
	msgs = append(msgs,
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": call.ID, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": args}}}},
		map[string]any{"role": "tool", "tool_call_id": call.ID, "content": "sunny, 24°C"},
	)
	resp = post(t, srv, map[string]any{"model": "gpt-4o-mini", "messages": msgs, "tools": weatherTools})
	c = decode[completion](t, resp)
	if resp.StatusCode != 200 || c.Choices[0].FinishReason != "stop" || string(c.Choices[0].Message.Content) != `"It is sunny in Paris."` || c.Choices[0].Message.ToolCalls != nil {
		t.Fatalf("second completion = %+v", c)
	}

	// What the model saw.
	reqs := model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model got %d requests", len(reqs))
	}
	r0 := reqs[0]
	if r0.Model != "gpt-4o-mini" || r0.MaxTokens != 100 || r0.Temperature == nil || *r0.Temperature != 0.2 || r0.ToolChoice != llm.ToolChoiceAuto {
		t.Errorf("first request = %+v", r0)
	}
	if len(r0.Tools) != 1 || r0.Tools[0].Name != "get_weather" || r0.Tools[0].Description == "" || !json.Valid(r0.Tools[0].Parameters) {
		t.Errorf("tools = %+v", r0.Tools)
	}
	if r0.Messages[0].Role != llm.RoleSystem || r0.Messages[1].Content != "Weather in Paris?" {
		t.Errorf("messages = %+v", r0.Messages)
	}
	m := reqs[1].Messages
	if len(m) != 4 || m[2].Role != llm.RoleAssistant || len(m[2].ToolCalls) != 1 || string(m[2].ToolCalls[0].Arguments) != `{"city":"Paris"}` ||
		m[3].Role != llm.RoleTool || m[3].ToolCallID != call.ID || m[3].Content != "sunny, 24°C" {
		t.Errorf("second request messages = %+v", m)
	}
}

// sse is a parsed event stream.
type sse struct {
	events []string // data payloads, without [DONE]
	done   bool     // "data: [DONE]" was received
	err    error    // read error at the end (nil on a clean EOF)
}

func readSSE(r io.Reader) sse {
	var s sse
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			s.err = fmt.Errorf("unexpected line %q", line)
			return s
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		s.events = append(s.events, data)
	}
	s.err = sc.Err()
	return s
}

type chunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role      string  `json:"role"`
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string  `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

func TestServerStreamToolRoundTrip(t *testing.T) {
	const text = "Let me check the weather for you."
	model := llmtest.NewScript(llmtest.Reply{
		Text: text,
		ToolCalls: []llm.ToolCall{
			llmtest.Call("get_weather", `{"city":"Paris","unit":"celsius"}`),
			llmtest.Call("get_weather", `{"city":"Zürich"}`),
		},
		Usage: llm.Usage{InputTokens: 30, OutputTokens: 20},
	})
	srv := newServer(t, model)
	resp := post(t, srv, map[string]any{
		"model": "gpt-4o-mini", "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{map[string]any{"role": "user", "content": "Weather in Paris and Zürich?"}}, "tools": weatherTools,
	})
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := readSSE(resp.Body)
	if s.err != nil || !s.done {
		t.Fatalf("stream ended with err %v, done %v", s.err, s.done)
	}

	var content strings.Builder
	contentDeltas := 0
	type call struct {
		id, name, args string
		fragments      int
	}
	var calls []*call
	var finish string
	var usageSeen bool
	for i, ev := range s.events {
		var c chunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if c.Object != "chat.completion.chunk" || c.Model != "gpt-4o-mini" || !strings.HasPrefix(c.ID, "chatcmpl-") {
			t.Errorf("event %d header = %+v", i, c)
		}
		if !strings.Contains(ev, `"usage":`) {
			t.Errorf("event %d has no usage key with include_usage: %s", i, ev)
		}
		if len(c.Choices) == 0 {
			if i != len(s.events)-1 || c.Usage == nil {
				t.Fatalf("event %d: empty choices outside the final usage chunk: %s", i, ev)
			}
			if c.Usage.PromptTokens != 30 || c.Usage.CompletionTokens != 20 || c.Usage.TotalTokens != 50 {
				t.Errorf("usage = %+v", c.Usage)
			}
			usageSeen = true
			continue
		}
		if c.Usage != nil {
			t.Errorf("event %d: usage on a choice chunk", i)
		}
		d := c.Choices[0].Delta
		if i == 0 {
			if d.Role != "assistant" || d.Content == nil || *d.Content != "" {
				t.Errorf("first delta = %s", ev)
			}
			continue
		}
		if d.Role != "" {
			t.Errorf("event %d repeats the role", i)
		}
		if d.Content != nil {
			content.WriteString(*d.Content)
			contentDeltas++
		}
		for _, tc := range d.ToolCalls {
			if tc.ID != "" {
				if tc.Index != len(calls) || tc.Type != "function" || tc.Function.Arguments == nil || *tc.Function.Arguments != "" {
					t.Errorf("tool call start = %s", ev)
				}
				calls = append(calls, &call{id: tc.ID, name: tc.Function.Name})
				continue
			}
			if tc.Index >= len(calls) || tc.Function.Name != "" || tc.Function.Arguments == nil {
				t.Fatalf("bad fragment %s", ev)
			}
			calls[tc.Index].args += *tc.Function.Arguments
			calls[tc.Index].fragments++
		}
		if fr := c.Choices[0].FinishReason; fr != nil {
			finish = *fr
		}
	}
	if content.String() != text || contentDeltas < 2 {
		t.Errorf("content %q in %d deltas", content.String(), contentDeltas)
	}
	if len(calls) != 2 {
		t.Fatalf("calls = %+v", calls)
	}
	for i, want := range []string{`{"city":"Paris","unit":"celsius"}`, `{"city":"Zürich"}`} {
		c := calls[i]
		if c.name != "get_weather" || c.args != want || c.fragments < 2 || c.fragments > 3 || c.id == "" {
			t.Errorf("call %d = %+v", i, *c)
		}
	}
	if finish != "tool_calls" || !usageSeen {
		t.Errorf("finish %q, usage seen %v", finish, usageSeen)
	}
	if r := srv.Requests(); len(r) != 1 || !r[0].Stream || !r[0].IncludeUsage || r[0].Status != 200 {
		t.Errorf("recorded = %+v", r)
	}
}

func TestServerStreamWithoutUsage(t *testing.T) {
	srv := newServer(t, llmtest.NewScript(llmtest.Text("Hi")))
	resp := post(t, srv, map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hello"}}})
	s := readSSE(resp.Body)
	if s.err != nil || !s.done {
		t.Fatalf("err %v, done %v", s.err, s.done)
	}
	var text strings.Builder
	for _, ev := range s.events {
		if strings.Contains(ev, `"usage"`) {
			t.Errorf("usage without include_usage: %s", ev)
		}
		var c chunk
		_ = json.Unmarshal([]byte(ev), &c)
		if len(c.Choices) != 1 {
			t.Fatalf("chunk without a choice: %s", ev)
		}
		if c.Choices[0].Delta.Content != nil {
			text.WriteString(*c.Choices[0].Delta.Content)
		}
	}
	// role chunk, "H", "i", finish chunk
	if len(s.events) != 4 || text.String() != "Hi" {
		t.Errorf("events %q", s.events)
	}
}

func TestServerFaults(t *testing.T) {
	user := map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	tests := []struct {
		name           string
		fault          llmtest.Fault
		status         int
		typ, code, msg string
		retry, retryMS string
		param          string
	}{
		{"rate limited", llmtest.RateLimited(1500 * time.Millisecond), 429, "requests", "rate_limit_exceeded", "Rate limit reached", "2", "1500", ""},
		{"rate limited no header", llmtest.RateLimited(0), 429, "requests", "rate_limit_exceeded", "Please try again", "", "", ""},
		{"unavailable", llmtest.Unavailable(503), 503, "server_error", "", "overloaded", "", "", ""},
		{"server error", llmtest.Unavailable(500), 500, "server_error", "", "The server had an error", "", "", ""},
		{"bad gateway", llmtest.Unavailable(502), 502, "server_error", "", "Bad gateway", "", "", ""},
		{"not a 5xx", llmtest.Unavailable(418), 503, "server_error", "", "overloaded", "", "", ""},
		{"overflow", llmtest.ContextOverflow(), 400, "invalid_request_error", "context_length_exceeded", "maximum context length is", "", "", "messages"},
		{"custom", llmtest.Fault{Status: 400, Message: "nope", Code: "x", Param: "p", RetryAfter: time.Second}, 400, "invalid_request_error", "x", "nope", "1", "1000", "p"},
		{"auth", llmtest.Fault{Status: 401}, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := llmtest.NewScript(llmtest.Text("fine"))
			srv := newServer(t, model)
			srv.Inject(tt.fault)
			if srv.PendingFaults() != 1 {
				t.Fatalf("PendingFaults = %d", srv.PendingFaults())
			}
			resp := post(t, srv, user)
			e := wantError(t, resp, tt.status, tt.typ, tt.code, tt.msg)
			if got := resp.Header.Get("retry-after"); got != tt.retry {
				t.Errorf("retry-after = %q, want %q", got, tt.retry)
			}
			if got := resp.Header.Get("retry-after-ms"); got != tt.retryMS {
				t.Errorf("retry-after-ms = %q, want %q", got, tt.retryMS)
			}
			if tt.param == "" && e.Error.Param != nil || tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
				t.Errorf("param = %v, want %q", e.Error.Param, tt.param)
			}
			if model.Calls() != 0 {
				t.Error("a status fault reached the model")
			}
			// The fault is spent: the next request is served.
			resp = post(t, srv, user)
			if c := decode[completion](t, resp); resp.StatusCode != 200 || string(c.Choices[0].Message.Content) != `"fine"` {
				t.Fatalf("after the fault: %d %+v", resp.StatusCode, c)
			}
			if r := srv.Requests(); len(r) != 2 || r[0].Status != tt.status || r[1].Status != 200 {
				t.Errorf("recorded statuses = %+v", r)
			}
		})
	}
}

func TestServerFaultsAreQueued(t *testing.T) {
	srv := newServer(t, llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text("ok") }))
	srv.Inject(llmtest.RateLimited(time.Second), llmtest.Unavailable(500))
	srv.Inject(llmtest.Slow(time.Millisecond))
	user := map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	var got []int
	for range 4 {
		got = append(got, post(t, srv, user).StatusCode)
	}
	if fmt.Sprint(got) != "[429 500 200 200]" || srv.PendingFaults() != 0 {
		t.Fatalf("statuses %v, pending %d", got, srv.PendingFaults())
	}
}

func TestServerDropStream(t *testing.T) {
	const text = "one two three four five"
	user := map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "count"}}}
	for _, after := range []int{0, 2, 100} {
		t.Run(fmt.Sprint(after), func(t *testing.T) {
			model := llmtest.NewScript(llmtest.Text(text), llmtest.Text(text))
			srv := newServer(t, model)
			srv.Inject(llmtest.DropStream(after))
			resp := post(t, srv, user)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			s := readSSE(resp.Body)
			if s.done {
				t.Fatal("dropped stream sent [DONE]")
			}
			if !errors.Is(s.err, io.ErrUnexpectedEOF) {
				t.Errorf("read error = %v, want unexpected EOF", s.err)
			}
			want := min(after, 7) // role chunk, 5 words, finish chunk
			if len(s.events) != want {
				t.Errorf("got %d events before the cut, want %d", len(s.events), want)
			}
			if model.Calls() != 1 {
				t.Errorf("model calls = %d", model.Calls())
			}
			// Normal service afterwards.
			s = readSSE(post(t, srv, user).Body)
			if !s.done || s.err != nil || len(s.events) != 7 {
				t.Errorf("after the drop: %d events, done %v, err %v", len(s.events), s.done, s.err)
			}
		})
	}
}

func TestServerDropNonStream(t *testing.T) {
	model := llmtest.NewScript(llmtest.Text("lost"), llmtest.Text("kept"))
	srv := newServer(t, model)
	srv.Inject(llmtest.DropStream(0))
	user := map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	resp, err := tryPost(context.Background(), srv, user)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("dropped request answered %d", resp.StatusCode)
	}
	if r := srv.Requests(); len(r) != 1 || r[0].Status != 0 {
		t.Errorf("recorded = %+v", r)
	}
	c := decode[completion](t, post(t, srv, user))
	if string(c.Choices[0].Message.Content) != `"kept"` {
		t.Errorf("after the drop: %s", c.Choices[0].Message.Content)
	}
}

func TestServerLatencyHonoursCancellation(t *testing.T) {
	model := llmtest.NewScript(llmtest.Text("late"), llmtest.Text("on time"))
	srv := llmtest.NewServer(model)
	srv.Inject(llmtest.Slow(time.Hour))
	user := map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := tryPost(ctx, srv, user)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for len(srv.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	// The server gives the request up as soon as the client goes away.
	for srv.Requests()[0].Status != llmtest.StatusClientClosedRequest {
		time.Sleep(time.Millisecond)
	}
	if model.Calls() != 0 {
		t.Error("a cancelled request reached the model")
	}
	resp := post(t, srv, user)
	if c := decode[completion](t, resp); string(c.Choices[0].Message.Content) != `"late"` {
		t.Errorf("next answer %s", c.Choices[0].Message.Content)
	}
	// The hour-long wait must not hold Close up (the test would time out).
	srv.Close()
}

func TestServerCloseEndsWaits(t *testing.T) {
	srv := llmtest.NewServer(llmtest.NewScript(llmtest.Text("x")), llmtest.WithLatency(time.Hour))
	errc := make(chan error, 1)
	go func() {
		resp, err := tryPost(context.Background(), srv, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for len(srv.Requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	srv.Close()
	srv.Close() // idempotent
	if err := <-errc; err == nil {
		t.Fatal("request in a closed server's wait succeeded")
	}
}

func TestServerWithLatencyServes(t *testing.T) {
	srv := newServer(t, llmtest.NewScript(llmtest.Text("ok")), llmtest.WithLatency(time.Millisecond))
	resp := post(t, srv, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestServerRejectsBrokenPairing(t *testing.T) {
	user := map[string]any{"role": "user", "content": "weather?"}
	assistant := func(ids ...string) map[string]any {
		var calls []any
		for _, id := range ids {
			calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris"}`}})
		}
		return map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
	}
	tool := func(id string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "content": "sunny"}
	}
	tests := []struct {
		name string
		msgs []any
		want string
	}{
		{"missing result", []any{user, assistant("call_a", "call_b"), tool("call_a")},
			"An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b"},
		{"no results then user", []any{user, assistant("call_x"), user},
			"The following tool_call_ids did not have response messages: call_x"},
		{"orphan tool message", []any{user, tool("call_z")},
			"Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."},
		{"tool message after the answers", []any{user, assistant("call_a"), tool("call_a"), user, tool("call_a")},
			"messages with role 'tool' must be a response to a preceeding message with 'tool_calls'"},
		{"unknown id", []any{user, assistant("call_a"), tool("call_q")},
			"Invalid parameter: 'tool_call_id' of 'call_q' not found in 'tool_calls' of previous message."},
		{"answered twice", []any{user, assistant("call_a"), tool("call_a"), tool("call_a")},
			"'call_a' has already been answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := llmtest.NewScript(llmtest.Text("never"))
			srv := newServer(t, model)
			resp := post(t, srv, map[string]any{"model": "m", "messages": tt.msgs, "tools": weatherTools})
			wantError(t, resp, 400, "invalid_request_error", "", tt.want)
			if model.Calls() != 0 {
				t.Error("an invalid request reached the model")
			}
			if r := srv.Requests(); len(r) != 1 || len(r[0].Request.Messages) != len(tt.msgs) || r[0].Status != 400 {
				t.Errorf("recorded = %+v", r)
			}
		})
	}
}

func TestServerValidates(t *testing.T) {
	user := []any{map[string]any{"role": "user", "content": "hi"}}
	tests := []struct {
		name      string
		body      any
		code, msg string
	}{
		{"malformed JSON", `{"model": "m", "messages": [`, "", "We could not parse the JSON body of your request."},
		{"wrong type", `{"model": "m", "messages": "hi"}`, "invalid_type", "Invalid type for 'messages'"},
		{"no model", map[string]any{"messages": user}, "", "you must provide a model parameter"},
		{"no messages", map[string]any{"model": "m"}, "missing_required_parameter", "Missing required parameter: 'messages'."},
		{"empty messages", map[string]any{"model": "m", "messages": []any{}}, "empty_array", "Invalid 'messages': empty array."},
		{"bad role", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "robot", "content": "x"}}}, "invalid_value", "Invalid value: 'robot'."},
		{"content object", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": map[string]any{}}}}, "invalid_type", "expected one of a string or array of objects, but got an object instead"},
		{"arguments object", map[string]any{"model": "m", "messages": []any{
			map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "f", "arguments": map[string]any{"a": 1}}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": "r"},
		}}, "invalid_type", "Invalid type for 'messages[0].tool_calls[0].function.arguments': expected a string, but got an object instead."},
		{"tool without id", map[string]any{"model": "m", "messages": []any{map[string]any{"role": "tool", "content": "r"}}}, "missing_required_parameter", "must have a 'tool_call_id'"},
		{"unknown tool choice", map[string]any{"model": "m", "messages": user, "tools": weatherTools,
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "nope"}}}, "", "Tool choice 'nope' not found in 'tools' parameter."},
		{"bad tool choice string", map[string]any{"model": "m", "messages": user, "tools": weatherTools, "tool_choice": "always"}, "invalid_value", "Supported values are: 'none', 'auto', and 'required'."},
		{"tool choice without tools", map[string]any{"model": "m", "messages": user, "tool_choice": "required"}, "", "'tool_choice' is only allowed when 'tools' are specified."},
		{"bad tool name", map[string]any{"model": "m", "messages": user, "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get weather"}}}}, "invalid_value", "string does not match pattern"},
		{"stream options without stream", map[string]any{"model": "m", "messages": user, "stream_options": map[string]any{"include_usage": true}}, "invalid_value", "only allowed when 'stream' is enabled"},
		{"temperature", map[string]any{"model": "m", "messages": user, "temperature": 3}, "decimal_above_max_value", "Invalid 'temperature'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			model := llmtest.NewScript(llmtest.Text("never"))
			srv := newServer(t, model)
			wantError(t, post(t, srv, tt.body), 400, "invalid_request_error", tt.code, tt.msg)
			if model.Calls() != 0 {
				t.Error("an invalid request reached the model")
			}
		})
	}
}

func TestServerDecodesRequestFields(t *testing.T) {
	model := llmtest.NewScript(llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)))
	srv := newServer(t, model)
	post(t, srv, map[string]any{
		"model": "gpt-4.1", "max_tokens": 42,
		"messages": []any{
			map[string]any{"role": "developer", "content": "Be brief."},
			map[string]any{"role": "user", "name": "ann", "content": []any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "image_url", "image_url": map[string]any{"url": "x"}}, map[string]any{"type": "text", "text": "b"}}},
			map[string]any{"role": "assistant", "content": "Checking.", "tool_calls": []any{map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": ""}}}},
			map[string]any{"role": "tool", "tool_call_id": "c1", "content": []any{map[string]any{"type": "text", "text": "rain"}}},
		},
		"tools":       weatherTools,
		"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}},
	})
	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "gpt-4.1" || r.MaxTokens != 42 || r.Temperature != nil || r.ToolChoice != "get_weather" {
		t.Errorf("request = %+v", r)
	}
	m := r.Messages
	if m[0].Role != llm.RoleSystem || m[1].Name != "ann" || m[1].Content != "a\nb" ||
		m[2].Content != "Checking." || string(m[2].ToolCalls[0].Arguments) != "{}" || m[3].Content != "rain" {
		t.Errorf("messages = %+v", m)
	}
	for _, choice := range []string{"none", "required", "auto"} {
		model := llmtest.NewScript(llmtest.Text("ok"))
		srv := newServer(t, model)
		post(t, srv, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "x"}}, "tools": weatherTools, "tool_choice": choice})
		want := llm.ToolChoice(choice)
		if choice == "auto" {
			want = llm.ToolChoiceAuto
		}
		if got := model.Requests()[0].ToolChoice; got != want {
			t.Errorf("tool_choice %q decoded as %q", choice, got)
		}
	}
}

func TestServerMaxContextChars(t *testing.T) {
	model := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text("ok") })
	srv := newServer(t, model, llmtest.WithMaxContextChars(20))
	msgs := func(text string) map[string]any {
		return map[string]any{"model": "m", "messages": []any{map[string]any{"role": "system", "content": "0123456789"}, map[string]any{"role": "user", "content": text}}}
	}
	if resp := post(t, srv, msgs("ééééééééé")); resp.StatusCode != 200 { // 19 characters
		t.Fatalf("status %d under the limit", resp.StatusCode)
	}
	e := wantError(t, post(t, srv, msgs("0123456789x")), 400, "invalid_request_error", "context_length_exceeded",
		"This model's maximum context length is 20 tokens. However, your messages resulted in 21 tokens.")
	if e.Error.Param == nil || *e.Error.Param != "messages" {
		t.Errorf("param = %v", e.Error.Param)
	}
	if model.Calls() != 1 {
		t.Errorf("model calls = %d", model.Calls())
	}
}

func TestServerAPIKey(t *testing.T) {
	model := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text("ok") })
	srv := newServer(t, model, llmtest.WithAPIKey("sk-test-0123456789"))
	srv.Inject(llmtest.Unavailable(500)) // taken by the first authorised request only
	body := map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}

	wantError(t, post(t, srv, body), 401, "invalid_request_error", "", "You didn't provide an API key.")
	e := wantError(t, post(t, srv, body, "Authorization", "Bearer sk-wrong-key-abcdef"), 401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: sk-************cdef.")
	if strings.Contains(e.Error.Message, "wrong-key") {
		t.Errorf("key not masked: %q", e.Error.Message)
	}
	wantError(t, post(t, srv, body, "Authorization", "sk-test-0123456789"), 401, "invalid_request_error", "invalid_api_key", "Incorrect API key")
	if srv.PendingFaults() != 1 {
		t.Fatal("an unauthorised request took a fault")
	}
	if resp := post(t, srv, body, "Authorization", "Bearer sk-test-0123456789"); resp.StatusCode != 500 {
		t.Fatalf("status %d, want the injected 500", resp.StatusCode)
	}
	if resp := post(t, srv, body, "Authorization", "Bearer sk-test-0123456789"); resp.StatusCode != 200 {
		t.Fatalf("status %d with the right key", resp.StatusCode)
	}
	reqs := srv.Requests()
	if len(reqs) != 5 || reqs[4].Header.Get("Authorization") != "Bearer sk-test-0123456789" || reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("recorded = %+v", reqs)
	}
	if model.Calls() != 1 {
		t.Errorf("model calls = %d", model.Calls())
	}
}

func TestServerModelErrors(t *testing.T) {
	tests := []struct {
		err            error
		status         int
		typ, code, msg string
		retryAfter     string
	}{
		{&llm.Error{Kind: llm.KindRateLimited, RetryAfter: 3 * time.Second}, 429, "requests", "rate_limit_exceeded", "Rate limit", "3"},
		{&llm.Error{Kind: llm.KindContextOverflow}, 400, "invalid_request_error", "context_length_exceeded", "maximum context length", ""},
		{&llm.Error{Kind: llm.KindAuth}, 401, "invalid_request_error", "invalid_api_key", "Incorrect API key", ""},
		{&llm.Error{Kind: llm.KindAuth, StatusCode: 403}, 403, "invalid_request_error", "permission_denied", "not allowed", ""},
		{&llm.Error{Kind: llm.KindUnavailable}, 503, "server_error", "", "overloaded", ""},
		{&llm.Error{Kind: llm.KindUnavailable, StatusCode: 502}, 502, "server_error", "", "Bad gateway", ""},
		{&llm.Error{Kind: llm.KindBadRequest, Message: "bad thing", Code: "bad_code"}, 400, "invalid_request_error", "bad_code", "bad thing", ""},
		{&llm.Error{Kind: llm.KindTimeout}, 504, "server_error", "timeout", "timed out", ""},
		{fmt.Errorf("wrapped: %w", &llm.Error{Kind: llm.KindRateLimited}), 429, "requests", "rate_limit_exceeded", "Rate limit", ""},
		{&llm.Error{Kind: llm.KindUnknown, StatusCode: 404}, 404, "invalid_request_error", "model_not_found", "does not exist", ""},
		{errors.New("boom"), 500, "server_error", "", "boom", ""},
	}
	for _, tt := range tests {
		t.Run(tt.err.Error(), func(t *testing.T) {
			srv := newServer(t, llmtest.NewScript(llmtest.Fail(tt.err)))
			for _, stream := range []bool{false, true} {
				if stream {
					srv = newServer(t, llmtest.NewScript(llmtest.Fail(tt.err)))
				}
				resp := post(t, srv, map[string]any{"model": "m", "stream": stream, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
				wantError(t, resp, tt.status, tt.typ, tt.code, tt.msg)
				if got := resp.Header.Get("retry-after"); got != tt.retryAfter {
					t.Errorf("retry-after = %q, want %q", got, tt.retryAfter)
				}
			}
		})
	}
}

func TestServerScriptExhausted(t *testing.T) {
	srv := newServer(t, llmtest.NewScript())
	wantError(t, post(t, srv, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}), 500, "server_error", "", "script exhausted: call 1 had no reply (0 scripted)")
}

func TestServerRequestsAndUnknownPaths(t *testing.T) {
	srv := newServer(t, llmtest.NewScript(llmtest.Text("ok")))
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	post(t, srv, body, "Authorization", "Bearer whatever", "X-Custom", "1")
	resp, err := srv.Client().Get(srv.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	wantError(t, resp, 404, "invalid_request_error", "", "Invalid URL (GET /v1/models)")

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || string(r.Body) != body || r.Stream ||
		r.Header.Get("Authorization") != "Bearer whatever" || r.Header.Get("X-Custom") != "1" ||
		r.Request.Model != "m" || len(r.Request.Messages) != 1 || r.Status != 200 {
		t.Errorf("first = %+v", r)
	}
	if reqs[1].Method != "GET" || reqs[1].Path != "/v1/models" || reqs[1].Status != 404 {
		t.Errorf("second = %+v", reqs[1])
	}
}

func TestServerConcurrent(t *testing.T) {
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		return llmtest.Text("echo " + req.Messages[0].Content)
	})
	srv := newServer(t, model)
	srv.Inject(llmtest.RateLimited(time.Second), llmtest.RateLimited(time.Second), llmtest.RateLimited(time.Second))
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for i := range 20 {
		wg.Go(func() {
			stream := i%2 == 0
			resp, err := tryPost(context.Background(), srv, map[string]any{"model": "m", "stream": stream, "messages": []any{map[string]any{"role": "user", "content": fmt.Sprint(i)}}})
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode == 200 {
				if stream {
					if s := readSSE(resp.Body); !s.done || s.err != nil {
						t.Errorf("stream %d: done %v, err %v", i, s.done, s.err)
					}
				} else {
					var c completion
					if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || string(c.Choices[0].Message.Content) != fmt.Sprintf(`"echo %d"`, i) {
						t.Errorf("request %d: %s, %v", i, c.Choices[0].Message.Content, err)
					}
				}
			}
			mu.Lock()
			statuses[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if statuses[429] != 3 || statuses[200] != 17 || len(srv.Requests()) != 20 || model.Calls() != 17 {
		t.Fatalf("statuses %v, recorded %d, model calls %d", statuses, len(srv.Requests()), model.Calls())
	}
}

func TestServerPassesCancellationToTheModel(t *testing.T) {
	model := llmtest.NewScript(llmtest.Reply{Text: "never", Delay: time.Hour})
	srv := newServer(t, model)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		resp, err := tryPost(ctx, srv, map[string]any{"model": "m", "stream": true, "messages": []any{map[string]any{"role": "user", "content": "hi"}}})
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for model.Calls() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	for srv.Requests()[0].Status != llmtest.StatusClientClosedRequest {
		time.Sleep(time.Millisecond)
	}
}

// clientFunc is an llm.Client answering Complete with a function.
type clientFunc func(llm.Request) (*llm.Response, error)

func (f clientFunc) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return f(req)
}

func (f clientFunc) Stream(_ context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		r, err := f(req)
		yield(llm.Chunk{Response: r}, err)
	}
}

func TestServerFillsGapsOfOtherModels(t *testing.T) {
	srv := newServer(t, clientFunc(func(req llm.Request) (*llm.Response, error) {
		if req.Messages[0].Content == "nil" {
			return nil, nil
		}
		return &llm.Response{Message: llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{Name: "a"}, {Name: "b", Arguments: json.RawMessage(`{"x":1}`)}}}}, nil
	}))
	c := decode[completion](t, post(t, srv, `{"messages":[{"role":"user","content":"hi"}],"model":"m"}`))
	ch := c.Choices[0]
	if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 2 {
		t.Fatalf("choice = %+v", ch)
	}
	a, b := ch.Message.ToolCalls[0], ch.Message.ToolCalls[1]
	if a.ID == "" || b.ID == "" || a.ID == b.ID || string(a.Function.Arguments) != `"{}"` || string(b.Function.Arguments) != `"{\"x\":1}"` {
		t.Errorf("calls = %+v / %+v", a, b)
	}
	wantError(t, post(t, srv, `{"messages":[{"role":"user","content":"nil"}],"model":"m"}`), 500, "server_error", "", "no response")
}
