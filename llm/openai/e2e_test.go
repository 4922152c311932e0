package openai

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// End-to-end tests against llmtest.Server, the fake OpenAI API, over real HTTP.

func newE2E(t *testing.T, model llm.Client) (*llmtest.Server, *Client) {
	t.Helper()
	srv := llmtest.NewServer(model, llmtest.WithAPIKey(testKey))
	t.Cleanup(srv.Close)
	c := New(Config{Model: "gpt-4o-mini", APIKey: testKey, BaseURL: srv.URL, HTTPClient: srv.Client()})
	return srv, c
}

var weatherTool = llm.ToolSpec{
	Name:        "get_weather",
	Description: "Current weather for a city",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
}

func TestE2EToolRoundTrip(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "complete"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			model := llmtest.NewScript(
				llmtest.Calls(llmtest.Call("get_weather", map[string]string{"city": "Paris"})),
				llmtest.Text("It is sunny in Paris."),
			)
			srv, c := newE2E(t, model)
			call := func(req llm.Request) *llm.Response {
				t.Helper()
				var resp *llm.Response
				var err error
				if stream {
					resp, err = llm.Collect(c.Stream(t.Context(), req))
				} else {
					resp, err = c.Complete(t.Context(), req)
				}
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			msgs := []llm.Message{llm.SystemMessage("Be brief."), llm.UserMessage("Weather in Paris?")}
			resp := call(llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weatherTool}})
			if resp.FinishReason != "tool_calls" || len(resp.Message.ToolCalls) != 1 {
				t.Fatalf("first turn: %+v", resp)
			}
			tc := resp.Message.ToolCalls[0]
			if tc.ID == "" || tc.Name != "get_weather" || !sameJSON(tc.Arguments, json.RawMessage(`{"city":"Paris"}`)) {
				t.Fatalf("tool call %+v (%s)", tc, tc.Arguments)
			}
			msgs = append(msgs, resp.Message, llm.ToolResultMessage(tc, "sunny, 24°C", false))
			resp = call(llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weatherTool}})
			if resp.Message.Content != "It is sunny in Paris." || resp.FinishReason != "stop" {
				t.Fatalf("second turn: %+v", resp)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			for i, r := range reqs {
				if r.Status != 200 || r.Stream != stream || r.IncludeUsage != stream {
					t.Errorf("request %d: status %d stream %v include_usage %v", i, r.Status, r.Stream, r.IncludeUsage)
				}
			}
			got := reqs[1].Request.Messages
			if len(got) != 4 || got[2].Role != llm.RoleAssistant || got[3].Role != llm.RoleTool ||
				got[2].ToolCalls[0].ID != tc.ID || got[3].ToolCallID != tc.ID {
				t.Fatalf("second request messages: %+v", got)
			}
			if err := llm.CheckPairing(got); err != nil {
				t.Fatal(err)
			}
			if len(reqs[1].Request.Tools) != 1 || reqs[1].Request.Tools[0].Name != "get_weather" {
				t.Errorf("tools sent: %+v", reqs[1].Request.Tools)
			}
		})
	}
}

func TestE2ERateLimited(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv, c := newE2E(t, llmtest.NewScript(llmtest.Text("ok")))
		srv.Inject(llmtest.RateLimited(3 * time.Second))
		req := llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}
		var err error
		if stream {
			_, err = llm.Collect(c.Stream(t.Context(), req))
		} else {
			_, err = c.Complete(t.Context(), req)
		}
		var e *llm.Error
		if !errors.As(err, &e) || e.Kind != llm.KindRateLimited || e.StatusCode != 429 || e.RetryAfter != 3*time.Second {
			t.Fatalf("stream=%v: %#v", stream, err)
		}
		if !llm.IsRetryable(err) || llm.RetryAfter(err) != 3*time.Second {
			t.Errorf("stream=%v: retryable %v, retry after %v", stream, llm.IsRetryable(err), llm.RetryAfter(err))
		}
		// The next request is served.
		if resp, err := c.Complete(t.Context(), req); err != nil || resp.Message.Content != "ok" {
			t.Fatalf("after the 429: %v %+v", err, resp)
		}
	}
}

func TestE2EDroppedStream(t *testing.T) {
	long := strings.Repeat("word ", 40)
	srv, c := newE2E(t, llmtest.NewScript(llmtest.Text(long)))
	srv.Inject(llmtest.DropStream(2))
	var text strings.Builder
	var err error
	for ch, e := range c.Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage("talk")}}) {
		if e != nil {
			err = e
			break
		}
		if ch.Response != nil {
			t.Fatal("a dropped stream produced a final response")
		}
		text.WriteString(ch.Text)
	}
	if llm.KindOf(err) != llm.KindUnavailable || !llm.IsRetryable(err) {
		t.Fatalf("dropped stream: %v (kind %v)", err, llm.KindOf(err))
	}
	if !strings.HasPrefix(long, text.String()) {
		t.Errorf("text before the drop %q", text.String())
	}
}

func TestE2EUnpairedToolMessage(t *testing.T) {
	srv, c := newE2E(t, llmtest.NewScript(llmtest.Text("never")))
	req := llm.Request{Messages: []llm.Message{
		llm.UserMessage("hi"),
		{Role: llm.RoleTool, ToolCallID: "call_missing", Name: "get_weather", Content: "sunny"},
	}}
	_, err := c.Complete(t.Context(), req)
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindBadRequest || e.StatusCode != 400 || e.Message == "" {
		t.Fatalf("unpaired tool message: %#v", err)
	}
	if llm.IsRetryable(err) {
		t.Error("a bad request is not retryable")
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].Status != 400 {
		t.Fatalf("requests: %+v", reqs)
	}
}

func TestE2EOtherFaults(t *testing.T) {
	cases := []struct {
		fault llmtest.Fault
		kind  llm.ErrorKind
	}{
		{llmtest.ContextOverflow(), llm.KindContextOverflow},
		{llmtest.Unavailable(503), llm.KindUnavailable},
		{llmtest.Unavailable(500), llm.KindUnavailable},
		{llmtest.Fault{Status: 504}, llm.KindTimeout},
		{llmtest.Fault{Status: 404, Message: "The model `nope` does not exist", Code: "model_not_found"}, llm.KindBadRequest},
	}
	for _, tc := range cases {
		srv, c := newE2E(t, llmtest.NewScript(llmtest.Text("ok")))
		srv.Inject(tc.fault)
		_, err := llm.Collect(c.Stream(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}))
		if llm.KindOf(err) != tc.kind {
			t.Errorf("fault %+v: %v, want kind %v", tc.fault, err, tc.kind)
		}
	}
	// A wrong key is an auth error, and the key does not leak into it.
	srv := llmtest.NewServer(llmtest.NewScript(llmtest.Text("ok")), llmtest.WithAPIKey("sk-right-key"))
	defer srv.Close()
	c := New(Config{APIKey: "sk-wrong-key-123456", BaseURL: srv.URL, HTTPClient: srv.Client()})
	_, err := c.Complete(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	if llm.KindOf(err) != llm.KindAuth || strings.Contains(err.Error(), "sk-wrong-key-123456") {
		t.Fatalf("wrong key: %v", err)
	}
}
