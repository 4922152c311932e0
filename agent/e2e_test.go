package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/llm/openai"
	"github.com/valetkit/valet/tool"
)

// The whole stack over real HTTP: the orchestrator drives the OpenAI client
// against the fake OpenAI server, which rejects any request that breaks
// tool-call pairing, as the real API does.

func httpStack(t *testing.T, model llm.Client, opts ...llmtest.ServerOption) (*llmtest.Server, llm.Client) {
	t.Helper()
	srv := llmtest.NewServer(model, opts...)
	t.Cleanup(srv.Close)
	return srv, openai.New(openai.Config{Model: "gpt-4o-mini", APIKey: "sk-test", BaseURL: srv.URL, HTTPClient: srv.Client()})
}

func TestEndToEndOverHTTP(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`), llmtest.Call("get_weather", `{"city":"Rome","days":9}`)),
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Rome","days":2}`)),
		llmtest.Text("Paris and Rome are sunny."),
	)
	srv, client := httpStack(t, s, llmtest.WithAPIKey("sk-test"))
	srv.Inject(llmtest.RateLimited(10 * time.Millisecond)) // the first call is rate limited
	o := newOrch(t, client, agent.Config{Tools: []tool.Tool{weatherTool()}, Loop: fastRetries})

	for _, stream := range []bool{false, true} {
		s.Reset()
		var res *agent.Result
		var err error
		if stream {
			for ev, e := range o.Stream(context.Background(), agent.Message{TenantID: "u1", ConversationID: "stream", Text: "Paris and Rome?"}) {
				if ev.Type == agent.EventExecutionEnd {
					res, err = ev.Result, e
				}
			}
		} else {
			res, err = o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: "plain", Text: "Paris and Rome?"})
		}
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		if res.Response != "Paris and Rome are sunny." || res.Turns != 3 || len(res.ToolCalls) != 3 ||
			!res.ToolCalls[0].Success || res.ToolCalls[1].Success || !res.ToolCalls[2].Success {
			t.Fatalf("stream=%v: result = %+v", stream, res)
		}
	}
	var statuses []int
	for _, r := range srv.Requests() {
		statuses = append(statuses, r.Status)
	}
	if len(statuses) != 7 || statuses[0] != 429 {
		t.Fatalf("statuses = %v, want a 429 then 6 answered requests", statuses)
	}
	for _, st := range statuses[1:] {
		if st != 200 {
			t.Fatalf("statuses = %v", statuses)
		}
	}
}

func TestEndToEndOverflowChainOverHTTP(t *testing.T) {
	big := strings.Repeat("search result line\n", 2000) // 38000 chars
	search := tool.New("search", "", func(ctx context.Context, in struct{}) (string, error) { return big, nil })
	turn := 0
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		turn++
		if turn == 1 {
			return llmtest.Calls(llmtest.Call("search", `{}`))
		}
		return llmtest.Text("Found it.")
	})
	srv, client := httpStack(t, s, llmtest.WithMaxContextChars(6000))
	o := newOrch(t, client, agent.Config{Tools: []tool.Tool{search}, Loop: agent.LoopConfig{ContextTokenLimit: 10000}})
	res, err := o.HandleMessage(context.Background(), msg("search"))
	if err != nil || res.Response != "Found it." {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	overflowed := false
	for _, r := range srv.Requests() {
		overflowed = overflowed || r.Status == 400
	}
	if !overflowed {
		t.Fatal("the server never reported an overflow: the test does not exercise the chain")
	}
}

func TestEndToEndAuthErrorIsNotRetried(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("unreachable"))
	srv := llmtest.NewServer(s, llmtest.WithAPIKey("sk-right"))
	t.Cleanup(srv.Close)
	client := openai.New(openai.Config{APIKey: "sk-wrong", BaseURL: srv.URL, HTTPClient: srv.Client()})
	o := newOrch(t, client, agent.Config{Loop: fastRetries})
	_, err := o.HandleMessage(context.Background(), msg("hi"))
	if llm.KindOf(err) != llm.KindAuth || len(srv.Requests()) != 1 || strings.Contains(err.Error(), "sk-wrong") {
		t.Fatalf("err=%v requests=%d", err, len(srv.Requests()))
	}
	var le *llm.Error
	if !errors.As(err, &le) || le.StatusCode != 401 {
		t.Fatalf("err = %#v", err)
	}
}

// Over HTTP, a context overflow whose message states the window and the
// request's size ("maximum context length is N tokens. However, your
// messages resulted in M tokens") is fitted in one retry: the client parses
// the figures, the loop shrinks straight to fit, and no rejected request is
// followed by another rejection.
func TestEndToEndOverflowIsFittedInOneRetry(t *testing.T) {
	s := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text(strings.Repeat("noted, ", 30)) })
	srv, client := httpStack(t, s, llmtest.WithMaxContextChars(3000))
	o := newOrch(t, client, agent.Config{Loop: fastRetries})
	for i := range 15 {
		if _, err := o.HandleMessage(context.Background(), msg(strings.Repeat("remember this too ", 10)+string(rune('a'+i)))); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	rejected, prev := 0, 0
	for i, r := range srv.Requests() {
		if r.Status == 400 {
			rejected++
			if prev == 400 {
				t.Fatalf("request %d was rejected right after a rejected one: not fitted in one retry", i)
			}
		}
		prev = r.Status
	}
	if rejected == 0 {
		t.Fatal("no request overflowed; the test does not exercise fitting")
	}
}
