package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

// FaultInjector queues faults on a fake server: [Server] and
// [AnthropicServer] are ones.
type FaultInjector interface {
	Inject(faults ...Fault)
}

// ContractSetup returns the llm.Client under test, talking over HTTP to a
// fake server (a [Server], an [AnthropicServer], or one of the backend's
// own) that answers with model, and that server's fault injection. It
// registers the server's shutdown with t.Cleanup.
type ContractSetup func(t *testing.T, model llm.Client) (llm.Client, FaultInjector)

// ClientContract runs the behaviour every llm.Client backend of valet
// shares, each case a subtest, against the fake server setup starts:
//
//   - a tool round trip, whole and streamed: parallel tool calls with ids,
//     names and arguments; their results go back paired; the system prompt
//     reaches the model; finish reasons "tool_calls" then "stop";
//   - streamed text arrives in pieces that add up to the final response,
//     which comes last;
//   - error kinds: 429 with Retry-After is llm.KindRateLimited with the
//     wait, and the next call is served; 5xx and 529 are KindUnavailable;
//     the provider's context-overflow error is KindContextOverflow; 401 is
//     KindAuth; 400 is KindBadRequest and not retryable; an HTML error page
//     is classified by its status, with a message, never a panic;
//   - a stream cut midway (text, or inside a tool call) is KindUnavailable
//     and yields no final response;
//   - a cancelled context gives an error for which errors.Is(err,
//     context.Canceled) holds; breaking out of a stream releases it and
//     the client goes on serving;
//   - the client does not modify the request's messages.
//
// llm/openai and llm/anthropic run it in their tests:
//
//	llmtest.ClientContract(t, func(t *testing.T, model llm.Client) (llm.Client, llmtest.FaultInjector) {
//		srv := llmtest.NewAnthropicServer(model)
//		t.Cleanup(srv.Close)
//		return anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: srv.Client()}), srv
//	})
func ClientContract(t *testing.T, setup ContractSetup) {
	t.Helper()
	weather := llm.ToolSpec{
		Name:        "get_weather",
		Description: "Current weather for a city",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
	hi := llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}}
	call := func(c llm.Client, ctx context.Context, req llm.Request, stream bool) (*llm.Response, error) {
		if stream {
			return llm.Collect(c.Stream(ctx, req))
		}
		return c.Complete(ctx, req)
	}

	for _, stream := range []bool{false, true} {
		name := "complete"
		if stream {
			name = "stream"
		}
		t.Run("ToolRoundTrip/"+name, func(t *testing.T) {
			model := NewScript(
				Calls(Call("get_weather", map[string]string{"city": "Paris"}), Call("get_weather", map[string]string{"city": "Oslo"})),
				Text("Sunny in Paris, rain in Oslo."),
			)
			c, _ := setup(t, model)
			msgs := []llm.Message{llm.SystemMessage("Be brief."), llm.UserMessage("Weather in Paris and Oslo?")}
			resp, err := call(c, t.Context(), llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weather}}, stream)
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != "tool_calls" || len(resp.Message.ToolCalls) != 2 || resp.Message.Role != llm.RoleAssistant {
				t.Fatalf("first turn: %+v", resp)
			}
			for i, city := range []string{"Paris", "Oslo"} {
				tc := resp.Message.ToolCalls[i]
				if tc.ID == "" || tc.Name != "get_weather" || !jsonEqual(tc.Arguments, `{"city":"`+city+`"}`) {
					t.Errorf("tool call %d: %+v (%s)", i, tc, tc.Arguments)
				}
			}
			if resp.Message.ToolCalls[0].ID == resp.Message.ToolCalls[1].ID {
				t.Errorf("two calls share the id %q", resp.Message.ToolCalls[0].ID)
			}
			msgs = append(msgs, resp.Message,
				llm.ToolResultMessage(resp.Message.ToolCalls[0], "sunny, 24°C", false),
				llm.ToolResultMessage(resp.Message.ToolCalls[1], "rain, 9°C", false))
			sent := cloneMessages(msgs)
			resp2, err := call(c, t.Context(), llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weather}}, stream)
			if err != nil {
				t.Fatal(err)
			}
			if resp2.Message.Content != "Sunny in Paris, rain in Oslo." || resp2.FinishReason != "stop" || len(resp2.Message.ToolCalls) != 0 {
				t.Fatalf("second turn: %+v", resp2)
			}
			if !reflect.DeepEqual(msgs, sent) {
				t.Error("the client modified the request's messages")
			}
			reqs := model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("the model got %d requests", len(reqs))
			}
			first := reqs[0]
			if len(first.Messages) == 0 || first.Messages[0].Role != llm.RoleSystem || first.Messages[0].Content != "Be brief." {
				t.Errorf("the system prompt did not reach the model: %+v", first.Messages)
			}
			if len(first.Tools) != 1 || first.Tools[0].Name != "get_weather" || !jsonEqual(first.Tools[0].Parameters, string(weather.Parameters)) {
				t.Errorf("tools: %+v", first.Tools)
			}
			got := reqs[1].Messages
			if err := llm.CheckPairing(got); err != nil {
				t.Fatal(err)
			}
			var results []llm.Message
			for _, m := range got {
				if m.Role == llm.RoleTool {
					results = append(results, m)
				}
			}
			if len(results) != 2 || results[0].ToolCallID != resp.Message.ToolCalls[0].ID || results[1].ToolCallID != resp.Message.ToolCalls[1].ID ||
				results[0].Content != "sunny, 24°C" || results[1].Content != "rain, 9°C" {
				t.Errorf("tool results the model saw: %+v", results)
			}
		})
	}

	t.Run("StreamText", func(t *testing.T) {
		c, _ := setup(t, NewScript(Text("The quick brown fox jumps over the lazy dog.")))
		var pieces []string
		var final *llm.Response
		for ch, err := range c.Stream(t.Context(), hi) {
			if err != nil {
				t.Fatal(err)
			}
			if final != nil {
				t.Fatal("a chunk after the final response")
			}
			if ch.Response != nil {
				final = ch.Response
				continue
			}
			pieces = append(pieces, ch.Text)
		}
		if final == nil || len(pieces) < 2 || strings.Join(pieces, "") != final.Message.Content ||
			final.Message.Content != "The quick brown fox jumps over the lazy dog." {
			t.Fatalf("pieces %q, final %+v", pieces, final)
		}
	})

	t.Run("RateLimited", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			c, srv := setup(t, NewScript(Text("ok")))
			srv.Inject(RateLimited(3 * time.Second))
			_, err := call(c, t.Context(), hi, stream)
			if llm.KindOf(err) != llm.KindRateLimited || llm.RetryAfter(err) != 3*time.Second || !llm.IsRetryable(err) {
				t.Fatalf("stream=%v: %v (kind %v, retry after %v)", stream, err, llm.KindOf(err), llm.RetryAfter(err))
			}
			if resp, err := call(c, t.Context(), hi, stream); err != nil || resp.Message.Content != "ok" {
				t.Fatalf("stream=%v: after the 429: %v %+v", stream, err, resp)
			}
		}
	})

	t.Run("ErrorKinds", func(t *testing.T) {
		cases := []struct {
			name  string
			fault Fault
			kind  llm.ErrorKind
		}{
			{"503", Unavailable(503), llm.KindUnavailable},
			{"500", Unavailable(500), llm.KindUnavailable},
			{"529 overloaded", Overloaded(), llm.KindUnavailable},
			{"context overflow", ContextOverflow(), llm.KindContextOverflow},
			{"401", Fault{Status: 401}, llm.KindAuth},
			{"400", Fault{Status: 400, Message: "messages: bad"}, llm.KindBadRequest},
			{"HTML 502", HTMLError(502), llm.KindUnavailable},
			{"HTML 403", HTMLError(403), llm.KindAuth},
		}
		for _, tc := range cases {
			for _, stream := range []bool{false, true} {
				c, srv := setup(t, NewScript(Text("ok")))
				srv.Inject(tc.fault)
				_, err := call(c, t.Context(), hi, stream)
				var e *llm.Error
				if !errors.As(err, &e) || e.Kind != tc.kind || e.Message == "" {
					t.Errorf("%s (stream=%v): %#v, want kind %v with a message", tc.name, stream, err, tc.kind)
				}
				if tc.kind == llm.KindBadRequest && llm.IsRetryable(err) {
					t.Errorf("%s: a bad request is not retryable", tc.name)
				}
			}
		}
	})

	t.Run("DroppedStream", func(t *testing.T) {
		replies := map[string]Reply{
			"text":      Text(strings.Repeat("word ", 40)),
			"tool call": Calls(Call("get_weather", map[string]string{"city": "a long city name, to cut"})),
		}
		for name, reply := range replies {
			for after := 1; after <= 4; after++ {
				c, srv := setup(t, NewScript(reply))
				srv.Inject(DropStream(after))
				var err error
				for ch, e := range c.Stream(t.Context(), llm.Request{Messages: hi.Messages, Tools: []llm.ToolSpec{weather}}) {
					if e != nil {
						err = e
						break
					}
					if ch.Response != nil {
						t.Fatalf("%s cut after %d events: a final response %+v", name, after, ch.Response)
					}
				}
				if llm.KindOf(err) != llm.KindUnavailable {
					t.Errorf("%s cut after %d events: %v (kind %v), want unavailable", name, after, err, llm.KindOf(err))
				}
			}
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		for _, stream := range []bool{false, true} {
			c, _ := setup(t, NewScript(Text("ok")))
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			_, err := call(c, ctx, hi, stream)
			if !errors.Is(err, context.Canceled) || llm.IsRetryable(err) {
				t.Errorf("stream=%v: %v, want context.Canceled, not retryable", stream, err)
			}
		}
	})

	t.Run("EarlyBreak", func(t *testing.T) {
		c, _ := setup(t, NewScript(Text(strings.Repeat("many words ", 50)), Text("again")))
		for range c.Stream(t.Context(), hi) {
			break
		}
		resp, err := c.Complete(t.Context(), hi)
		if err != nil || resp.Message.Content != "again" {
			t.Fatalf("after an early break: %v %+v", err, resp)
		}
	})
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func cloneMessages(msgs []llm.Message) []llm.Message {
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		m.ToolCalls = append([]llm.ToolCall(nil), m.ToolCalls...)
		out[i] = m
	}
	return out
}
