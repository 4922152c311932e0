package openai

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

const testKey = "sk-test-secret-0123456789"

// The recording format of testdata/openai-recorded (see its README.md).
type fixture struct {
	Title     string `json:"title"`
	Provider  string `json:"provider"`
	Exchanges []struct {
		Request struct {
			Path    string          `json:"path"`
			BodyRaw *string         `json:"body_raw"`
			Body    json.RawMessage `json:"body"`
		} `json:"request"`
		Response struct {
			Status  int                        `json:"status"`
			Headers map[string]json.RawMessage `json:"headers"`
			BodyRaw *string                    `json:"body_raw"`
			Body    json.RawMessage            `json:"body"`
			SSE     []string                   `json:"sse"`
		} `json:"response"`
	} `json:"exchanges"`
}

// recBody is the part of a recorded request body the tests rebuild requests from.
type recBody struct {
	Model    string `json:"model"`
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID string `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice    json.RawMessage `json:"tool_choice"`
	Stream        *bool           `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Temperature         *float64 `json:"temperature"`
	MaxTokens           int      `json:"max_tokens"`
	MaxCompletionTokens int      `json:"max_completion_tokens"`
}

type wantReply struct {
	Text   string
	Finish string
	Usage  llm.Usage
	Calls  []wantCall
}

type wantCall struct{ ID, Name, Args string }

type wantError struct {
	Exchange   int
	Kind       llm.ErrorKind
	Code       string
	Status     int
	RetryAfter time.Duration
}

// wantErrors: how each recorded failure must be classified.
var wantErrors = map[string]wantError{
	"groq_error_400_tool_use_failed_multiturn.json":         {0, llm.KindBadRequest, "tool_use_failed", 400, 0},
	"groq_stream_error_event_then_tool_call_multiturn.json": {0, llm.KindBadRequest, "tool_use_failed", 400, 0}, // "event: error" in a 200 stream
	"openai_error_400_context_length_exceeded.json":         {0, llm.KindContextOverflow, "context_length_exceeded", 400, 0},
	"openai_error_401_invalid_api_key.json":                 {0, llm.KindAuth, "invalid_api_key", 401, 0},
	"openai_error_429_overloaded_server_error.json":         {0, llm.KindRateLimited, "", 429, 0},
	"openai_error_429_rate_limit_exceeded.json":             {0, llm.KindRateLimited, "rate_limit_exceeded", 429, 20 * time.Second},
	"openai_error_500_server_error.json":                    {0, llm.KindUnavailable, "", 500, 0},
	"openrouter_error_429_integer_code.json":                {0, llm.KindRateLimited, "429", 429, 0},
	"openrouter_stream_inline_error_and_comments.json":      {0, llm.KindBadRequest, "400", 400, 0}, // "error" object in a 200 chunk
	"zai_error_429_string_code_overloaded.json":             {0, llm.KindRateLimited, "1305", 429, 0},
}

func loadFixture(t *testing.T, name string) *fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "openai-recorded", name))
	if err != nil {
		t.Fatal(err)
	}
	var fx fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &fx
}

// received is one request as the replay server saw it.
type received struct {
	Path, Query string
	Header      http.Header
	Body        []byte
}

// replayServer answers the n-th request with the n-th recorded response:
// status, headers and body bytes as recorded.
type replayServer struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	next int
}

func newReplayServer(t *testing.T, fx *fixture) *replayServer {
	rs := &replayServer{}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rs.mu.Lock()
		i := rs.next
		rs.next++
		rs.got = append(rs.got, received{Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		rs.mu.Unlock()
		if i >= len(fx.Exchanges) {
			http.Error(w, "no more recorded exchanges", http.StatusTeapot)
			return
		}
		resp := fx.Exchanges[i].Response
		for k, raw := range resp.Headers {
			switch strings.ToLower(k) {
			case "content-length", "transfer-encoding", "content-encoding", "connection", "keep-alive":
				continue // framing belongs to this server, not the recording
			}
			var one string
			var many []string
			if json.Unmarshal(raw, &one) == nil {
				w.Header().Add(k, one)
			} else if json.Unmarshal(raw, &many) == nil {
				for _, v := range many {
					w.Header().Add(k, v)
				}
			}
		}
		var out []byte
		switch {
		case resp.BodyRaw != nil:
			out = []byte(*resp.BodyRaw)
		case resp.SSE != nil:
			var b strings.Builder
			for _, d := range resp.SSE {
				b.WriteString("data: " + d + "\n\n")
			}
			out = []byte(b.String())
		case len(resp.Body) > 0 && string(resp.Body) != "null":
			out = resp.Body
		}
		w.WriteHeader(resp.Status)
		_, _ = w.Write(out)
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *replayServer) request(i int) received {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.got[i]
}

// requestFrom rebuilds the llm.Request a caller would have made for a
// recorded request body.
func requestFrom(t *testing.T, rb *recBody) llm.Request {
	t.Helper()
	req := llm.Request{Model: rb.Model, Temperature: rb.Temperature, MaxTokens: rb.MaxTokens}
	if rb.MaxCompletionTokens > 0 {
		req.MaxTokens = rb.MaxCompletionTokens
	}
	for _, m := range rb.Messages {
		msg := llm.Message{Role: llm.Role(m.Role), Content: contentText(m.Content), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
		}
		req.Messages = append(req.Messages, msg)
	}
	for _, tl := range rb.Tools {
		req.Tools = append(req.Tools, llm.ToolSpec{Name: tl.Function.Name, Description: tl.Function.Description, Parameters: tl.Function.Parameters})
	}
	var choice string
	var named struct {
		Function struct{ Name string } `json:"function"`
	}
	switch {
	case len(rb.ToolChoice) == 0:
	case json.Unmarshal(rb.ToolChoice, &choice) == nil:
		if choice != "auto" {
			req.ToolChoice = llm.ToolChoice(choice)
		}
	case json.Unmarshal(rb.ToolChoice, &named) == nil:
		req.ToolChoice = llm.ToolChoice(named.Function.Name)
	default:
		t.Fatalf("tool_choice %s", rb.ToolChoice)
	}
	return req
}

// TestRecordedFixtures replays every recorded exchange over real HTTP and
// checks both what the client sent and what it made of the answer.
func TestRecordedFixtures(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "openai-recorded", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			fx := loadFixture(t, name)
			wantR, ok := wantReplies[name]
			if !ok || len(wantR) != len(fx.Exchanges) {
				t.Fatalf("no expectations for %s (%d exchanges)", name, len(fx.Exchanges))
			}
			srv := newReplayServer(t, fx)
			for i, ex := range fx.Exchanges {
				// Derive the base URL from the recorded path, so the path and
				// query the client sends can be checked (Azure deployments,
				// DeepSeek without /v1, OpenRouter's /api/v1...).
				path, query, _ := strings.Cut(ex.Request.Path, "?")
				prefix, isChat := strings.CutSuffix(path, "/chat/completions")
				if !isChat {
					prefix = "/v1" // the 500 was recorded on another endpoint
				}
				base := srv.URL + prefix
				if query != "" {
					base += "?" + query
				}
				cfg := Config{APIKey: testKey, BaseURL: base}
				if fx.Provider == "azure-openai" {
					cfg.Headers = map[string]string{"api-key": "azure-test-key"}
					cfg.Model = "gpt-5-nano"
				}
				c := New(cfg)

				var rb recBody
				raw := []byte(ex.Request.Body)
				if ex.Request.BodyRaw != nil {
					raw = []byte(*ex.Request.BodyRaw)
				}
				_ = json.Unmarshal(raw, &rb)
				replayable := isChat && len(rb.Messages) > 0
				req := llm.Request{Messages: []llm.Message{llm.UserMessage("hello")}}
				if replayable {
					req = requestFrom(t, &rb)
				}
				stream := rb.Stream != nil && *rb.Stream

				var resp *llm.Response
				var err error
				var text strings.Builder
				if stream {
					for ch, err2 := range c.Stream(t.Context(), req) {
						if err2 != nil {
							err = err2
							break
						}
						text.WriteString(ch.Text)
						if ch.Response != nil {
							resp = ch.Response
						}
					}
				} else {
					resp, err = c.Complete(t.Context(), req)
				}

				got := srv.request(i)
				checkSent(t, i, got, &rb, replayable, stream, cfg)
				if isChat && (got.Path != path || got.Query != query) {
					t.Errorf("exchange %d: sent to %s?%s, recorded %s?%s", i, got.Path, got.Query, path, query)
				}

				want := wantR[i]
				if want == nil {
					we, ok := wantErrors[name]
					if !ok || we.Exchange != i {
						t.Fatalf("exchange %d: no error expectation", i)
					}
					checkError(t, i, err, we)
					continue
				}
				if err != nil {
					t.Fatalf("exchange %d: %v", i, err)
				}
				if resp == nil {
					t.Fatalf("exchange %d: no final response", i)
				}
				if stream && text.String() != resp.Message.Content {
					t.Errorf("exchange %d: streamed text %q, final content %q", i, text.String(), resp.Message.Content)
				}
				checkReply(t, i, resp, want)
			}
			if n := len(srv.got); n != len(fx.Exchanges) {
				t.Errorf("%d requests for %d exchanges", n, len(fx.Exchanges))
			}
		})
	}
}

func checkSent(t *testing.T, i int, got received, rb *recBody, replayable, stream bool, cfg Config) {
	t.Helper()
	if h := got.Header.Get("Authorization"); h != "Bearer "+cfg.APIKey {
		t.Errorf("exchange %d: Authorization %q", i, h)
	}
	for k, v := range cfg.Headers {
		if got.Header.Get(k) != v {
			t.Errorf("exchange %d: header %s = %q, want %q", i, k, got.Header.Get(k), v)
		}
	}
	var sent recBody
	if err := json.Unmarshal(got.Body, &sent); err != nil {
		t.Fatalf("exchange %d: sent body: %v", i, err)
	}
	if (sent.Stream != nil && *sent.Stream) != stream {
		t.Errorf("exchange %d: stream = %v, want %v", i, sent.Stream != nil && *sent.Stream, stream)
	}
	if stream && (sent.StreamOptions == nil || !sent.StreamOptions.IncludeUsage) {
		t.Errorf("exchange %d: stream_options.include_usage not set", i)
	}
	if !replayable {
		return
	}
	wantModel := rb.Model
	if wantModel == "" {
		wantModel = cfg.Model
	}
	if sent.Model != wantModel {
		t.Errorf("exchange %d: model %q, want %q", i, sent.Model, wantModel)
	}
	if len(sent.Messages) != len(rb.Messages) {
		t.Fatalf("exchange %d: sent %d messages, recorded %d", i, len(sent.Messages), len(rb.Messages))
	}
	for j, m := range rb.Messages {
		s := sent.Messages[j]
		if s.Role != m.Role || s.ToolCallID != m.ToolCallID || contentText(s.Content) != contentText(m.Content) {
			t.Errorf("exchange %d message %d: sent role=%s tool_call_id=%q content=%.40q; recorded role=%s tool_call_id=%q content=%.40q",
				i, j, s.Role, s.ToolCallID, contentText(s.Content), m.Role, m.ToolCallID, contentText(m.Content))
		}
		if len(s.ToolCalls) != len(m.ToolCalls) {
			t.Errorf("exchange %d message %d: %d tool calls, recorded %d", i, j, len(s.ToolCalls), len(m.ToolCalls))
			continue
		}
		for k, tc := range m.ToolCalls {
			stc := s.ToolCalls[k]
			if stc.ID != tc.ID || stc.Function.Name != tc.Function.Name || stc.Function.Arguments != tc.Function.Arguments {
				t.Errorf("exchange %d message %d call %d: sent %+v, recorded %+v", i, j, k, stc, tc)
			}
		}
	}
	if len(sent.Tools) != len(rb.Tools) {
		t.Fatalf("exchange %d: sent %d tools, recorded %d", i, len(sent.Tools), len(rb.Tools))
	}
	for j, tl := range rb.Tools {
		s := sent.Tools[j].Function
		if s.Name != tl.Function.Name || s.Description != tl.Function.Description || !sameJSON(s.Parameters, tl.Function.Parameters) {
			t.Errorf("exchange %d tool %d: sent %s %s, recorded %s %s", i, j, s.Name, s.Parameters, tl.Function.Name, tl.Function.Parameters)
		}
	}
	var rc, sc string
	_ = json.Unmarshal(rb.ToolChoice, &rc)
	if rc == "auto" || rc == "" && len(rb.ToolChoice) == 0 {
		if len(sent.ToolChoice) != 0 {
			t.Errorf("exchange %d: tool_choice %s sent for auto", i, sent.ToolChoice)
		}
	} else if !sameJSON(sent.ToolChoice, rb.ToolChoice) {
		_ = json.Unmarshal(sent.ToolChoice, &sc)
		t.Errorf("exchange %d: tool_choice %s, recorded %s", i, sent.ToolChoice, rb.ToolChoice)
	}
	if !reflect.DeepEqual(sent.Temperature, rb.Temperature) {
		t.Errorf("exchange %d: temperature %v, recorded %v", i, sent.Temperature, rb.Temperature)
	}
	if want := max(rb.MaxTokens, rb.MaxCompletionTokens); max(sent.MaxTokens, sent.MaxCompletionTokens) != want {
		t.Errorf("exchange %d: token cap %d/%d, recorded %d", i, sent.MaxTokens, sent.MaxCompletionTokens, want)
	}
}

func checkReply(t *testing.T, i int, resp *llm.Response, want *wantReply) {
	t.Helper()
	if resp.Message.Role != llm.RoleAssistant {
		t.Errorf("exchange %d: role %q", i, resp.Message.Role)
	}
	if resp.Message.Content != want.Text {
		t.Errorf("exchange %d: text %q, want %q", i, resp.Message.Content, want.Text)
	}
	if resp.FinishReason != want.Finish {
		t.Errorf("exchange %d: finish %q, want %q", i, resp.FinishReason, want.Finish)
	}
	if resp.Usage != want.Usage {
		t.Errorf("exchange %d: usage %+v, want %+v", i, resp.Usage, want.Usage)
	}
	if len(resp.Message.ToolCalls) != len(want.Calls) {
		t.Fatalf("exchange %d: %d tool calls, want %d: %+v", i, len(resp.Message.ToolCalls), len(want.Calls), resp.Message.ToolCalls)
	}
	for k, w := range want.Calls {
		g := resp.Message.ToolCalls[k]
		if g.ID != w.ID || g.Name != w.Name {
			t.Errorf("exchange %d call %d: %s %s, want %s %s", i, k, g.ID, g.Name, w.ID, w.Name)
		}
		var obj map[string]any
		if json.Unmarshal(g.Arguments, &obj) != nil || obj == nil {
			t.Errorf("exchange %d call %d: arguments %s are not a JSON object", i, k, g.Arguments)
		}
		if !sameJSON(g.Arguments, json.RawMessage(w.Args)) {
			t.Errorf("exchange %d call %d: arguments %s, want %s", i, k, g.Arguments, w.Args)
		}
	}
	if err := llm.CheckPairing([]llm.Message{resp.Message}); len(resp.Message.ToolCalls) > 0 && err == nil {
		t.Errorf("exchange %d: pairing check should see unanswered calls", i)
	}
}

func checkError(t *testing.T, i int, err error, we wantError) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("exchange %d: error %v (%T), want *llm.Error", i, err, err)
	}
	if e.Kind != we.Kind || e.Code != we.Code || e.StatusCode != we.Status || e.RetryAfter != we.RetryAfter {
		t.Errorf("exchange %d: got kind=%v code=%q status=%d retry-after=%v, want kind=%v code=%q status=%d retry-after=%v (%v)",
			i, e.Kind, e.Code, e.StatusCode, e.RetryAfter, we.Kind, we.Code, we.Status, we.RetryAfter, err)
	}
	if e.Message == "" {
		t.Errorf("exchange %d: empty message", i)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("exchange %d: API key in error %q", i, err)
	}
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
