package agent_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/tool"
)

const (
	leakySecret = "SECRET123"
	leakyText   = "GET https://api.x/y?access_token=" + leakySecret + " failed"
)

type FetchIn struct {
	What string `json:"what" jsonschema:"description=What to fetch"`
}

// leakyAgent fails with a text holding an access token: it panics with it,
// or returns it as its error.
type leakyAgent struct{ panics bool }

func (a leakyAgent) Run(ctx context.Context, in FetchIn) (agent.Reply, error) {
	if a.panics {
		panic(leakyText)
	}
	return agent.Reply{}, errors.New(leakyText)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A failing tool or Agent-Tool whose failure text holds a secret (a panic
// printing a URL with access_token=, or an error saying it) does not leak
// it to the model, the history, the telemetry or the stream; the model
// still learns the call failed, and a panic is logged, its secrets masked,
// through the logger only.
func TestToolFailureSecretsScrubbed(t *testing.T) {
	cases := []struct {
		name   string
		tool   tool.Tool
		agent  *leakyAgent
		panics bool
	}{
		{name: "agent panics", agent: &leakyAgent{panics: true}, panics: true},
		{name: "agent returns error", agent: &leakyAgent{}},
		{name: "tool returns error", tool: tool.New("fetch", "Fetch something", func(ctx context.Context, in FetchIn) (string, error) {
			return "", errors.New(leakyText)
		})},
		{name: "tool panics", tool: tool.New("fetch", "Fetch something", func(ctx context.Context, in FetchIn) (string, error) {
			panic(leakyText)
		}), panics: true},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				s := llmtest.NewStrictScript(t,
					llmtest.Calls(llmtest.Call("fetch", `{"what":"y"}`)),
					llmtest.Text("The fetch failed."),
				)
				var logs syncBuffer
				mem := newMem(t, memory.Config{})
				cfg := agent.Config{Memory: mem, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
				if tc.tool != nil {
					cfg.Tools = []tool.Tool{tc.tool}
				} else {
					reg := agent.NewRegistry()
					if err := agent.Register(reg, "fetch", "Fetch something", *tc.agent); err != nil {
						t.Fatal(err)
					}
					cfg.Agents = reg
				}
				o := newOrch(t, paired{t, s}, cfg)
				var (
					res    *agent.Result
					err    error
					events []string
				)
				if stream {
					for ev, e := range o.Stream(context.Background(), msg("Fetch y")) {
						if ev.ToolCall != nil {
							events = append(events, fmt.Sprintf("%+v", *ev.ToolCall))
						}
						events = append(events, ev.Text)
						if ev.Type == agent.EventExecutionEnd {
							res, err = ev.Result, e
						}
					}
				} else {
					res, err = o.HandleMessage(context.Background(), msg("Fetch y"))
				}
				if err != nil || res.Status != agent.StatusCompleted {
					t.Fatalf("res = %+v, err = %v", res, err)
				}
				if len(res.ToolCalls) != 1 || res.ToolCalls[0].Success || res.ToolCalls[0].Error == "" {
					t.Fatalf("tool calls = %+v, want one failed call with its error", res.ToolCalls)
				}
				if e := res.ToolCalls[0].Error; strings.Contains(e, leakySecret) {
					t.Errorf("ToolCallRecord.Error leaks the secret: %q", e)
				}
				// The model learns that the call failed.
				reqs := s.Requests()
				second := reqs[1].Messages
				last := second[len(second)-1]
				if last.Role != llm.RoleTool || !last.IsError || !strings.Contains(last.Content, "fetch") {
					t.Fatalf("the model got %+v, want the failure of fetch", last)
				}
				if !tc.panics && !strings.Contains(last.Content, "access_token=") {
					t.Errorf("the model does not learn what failed: %q", last.Content)
				}
				for i, r := range reqs {
					for _, m := range r.Messages {
						if strings.Contains(m.Content, leakySecret) {
							t.Errorf("request %d leaks the secret to the model: %q", i, m.Content)
						}
					}
				}
				h, herr := mem.History(context.Background(), "u1", "c1", 100)
				if herr != nil || len(h) == 0 {
					t.Fatalf("history: %v, %v", h, herr)
				}
				for _, m := range h {
					if strings.Contains(m.Content, leakySecret) {
						t.Errorf("the history leaks the secret: %q", m.Content)
					}
				}
				for _, ev := range events {
					if strings.Contains(ev, leakySecret) {
						t.Errorf("an event leaks the secret: %s", ev)
					}
				}
				if tc.panics && !strings.Contains(logs.String(), "access_token=***") {
					t.Errorf("the panic is not in the log: %s", logs.String())
				}
				if strings.Contains(logs.String(), leakySecret) {
					t.Errorf("the log leaks the secret: %s", logs.String())
				}
			})
		}
	}
}

// A tool's failure text that quotes a secret the way Go errors do — a
// response body quoted with %q (JSON with escaped quotes), or a URL nested
// in a query parameter with its = and ? percent-encoded — still has the
// secret masked before the model, the history and the telemetry see it.
func TestToolFailureSecretsInQuotedOrEncodedText(t *testing.T) {
	for name, failure := range map[string]string{
		"body quoted with %q":  fmt.Sprintf("token exchange failed: %q", `{"access_token":"`+leakySecret+`","token_type":"bearer"}`),
		"encoded redirect url": "redirect to https://app.example/cb?next=https%3A%2F%2Fx.example%2Fcb%3Faccess_token%3D" + leakySecret + " refused",
		"encoded lower-case =": "GET https://x.example/?u=https%3a%2f%2fy%3fapi_key%3d" + leakySecret + " failed",
		"double quoted by %q":  fmt.Sprintf("%q", fmt.Sprintf("body %q", `{"password":"`+leakySecret+`"}`)),
	} {
		t.Run(name, func(t *testing.T) {
			s := llmtest.NewStrictScript(t,
				llmtest.Calls(llmtest.Call("fetch", `{"what":"y"}`)),
				llmtest.Text("The fetch failed."),
			)
			mem := newMem(t, memory.Config{})
			o := newOrch(t, paired{t, s}, agent.Config{Memory: mem, Tools: []tool.Tool{
				tool.New("fetch", "Fetch something", func(ctx context.Context, in FetchIn) (string, error) {
					return "", errors.New(failure)
				}),
			}})
			res, err := o.HandleMessage(context.Background(), msg("Fetch y"))
			if err != nil || len(res.ToolCalls) != 1 || res.ToolCalls[0].Success {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			if e := res.ToolCalls[0].Error; strings.Contains(e, leakySecret) {
				t.Errorf("ToolCallRecord.Error leaks the secret: %q", e)
			}
			for _, m := range s.Requests()[1].Messages {
				if strings.Contains(m.Content, leakySecret) {
					t.Errorf("the model reads the secret: %q", m.Content)
				}
			}
			h, _ := mem.History(context.Background(), "u1", "c1", 100)
			for _, m := range h {
				if strings.Contains(m.Content, leakySecret) {
					t.Errorf("the history keeps the secret: %q", m.Content)
				}
			}
		})
	}
}
