package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// listSource is a ToolSource whose list a test changes; it counts reads.
type listSource struct {
	mu    sync.Mutex
	tools []tool.Tool
	err   error
	reads int
}

func (s *listSource) Tools(context.Context) ([]tool.Tool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.tools, s.err
}

func (s *listSource) set(ts ...tool.Tool) {
	s.mu.Lock()
	s.tools = ts
	s.mu.Unlock()
}

func (s *listSource) readCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

type panicSource struct{}

func (panicSource) Tools(context.Context) ([]tool.Tool, error) { panic("source broke") }

// echoTool is a tool named name that answers reply.
func echoTool(name, reply string) tool.Tool {
	return tool.New(name, "Answers "+reply, func(context.Context, struct{}) (string, error) { return reply, nil })
}

func toolNames(specs []llm.ToolSpec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

// A list that changes while a run goes on reaches the next run, not the
// running one: each run reads its sources once, at its start.
func TestToolSourceRefreshReachesNextRun(t *testing.T) {
	src := &listSource{}
	grow := tool.New("grow", "Adds a tool to the source", func(context.Context, struct{}) (string, error) {
		src.mu.Lock()
		src.tools = []tool.Tool{src.tools[0], echoTool("fresh", "fresh answer")}
		src.mu.Unlock()
		return "grown", nil
	})
	src.set(grow)
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("grow", `{}`)),
		llmtest.Text("grown"),
		llmtest.Calls(llmtest.Call("fresh", `{}`)),
		llmtest.Text("done"),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}, ToolSources: []agent.ToolSource{src}})
	res, err := o.HandleMessage(context.Background(), msg("grow"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 1 || !res.ToolCalls[0].Success {
		t.Fatalf("first run's tool calls %+v: want grow to succeed", res.ToolCalls)
	}
	res, err = o.HandleMessage(context.Background(), msg("use it"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 1 || !res.ToolCalls[0].Success {
		t.Fatalf("second run's tool calls %+v: want fresh to succeed", res.ToolCalls)
	}
	reqs := s.Requests()
	want := [][]string{
		{"get_weather", "grow"},          // run 1, turn 1
		{"get_weather", "grow"},          // run 1, turn 2: the change waits for the next run
		{"get_weather", "grow", "fresh"}, // run 2
		{"get_weather", "grow", "fresh"},
	}
	if len(reqs) != len(want) {
		t.Fatalf("%d model requests, want %d", len(reqs), len(want))
	}
	for i, w := range want {
		if got := toolNames(reqs[i].Tools); !slices.Equal(got, w) {
			t.Errorf("request %d offered %v, want %v", i, got, w)
		}
	}
	if n := src.readCount(); n != 2 {
		t.Errorf("the source was read %d times in two runs, want 2 (once per run)", n)
	}
	if got := res.ToolCalls[0].Name; got != "fresh" {
		t.Errorf("second run called %q, want fresh", got)
	}
}

// A source tool named like a tool of Config.Tools, an Agent-Tool or a tool
// of an earlier source is refused for the run, with a WARN line; the tool
// already there keeps its name and is the one that runs.
func TestToolSourceCollisionsRefused(t *testing.T) {
	h := newRecordLog()
	first := &listSource{tools: []tool.Tool{echoTool("get_weather", "SHADOW"), echoTool("send_email", "SHADOW"), echoTool("lookup", "first")}}
	second := &listSource{tools: []tool.Tool{echoTool("lookup", "second"), echoTool("extra", "extra")}}
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`), llmtest.Call("lookup", `{}`)),
		llmtest.Text("done"),
	)
	o := agentsOrch(t, s, agent.Config{Logger: slog.New(h), ToolSources: []agent.ToolSource{first, second}}, &emailAgent{}, &noteAgent{})
	res, err := o.HandleMessage(context.Background(), msg("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	got := toolNames(s.Requests()[0].Tools)
	want := []string{"get_weather", "send_email", "save_note", "lookup", "extra"}
	if !slices.Equal(got, want) {
		t.Fatalf("offered %v, want %v", got, want)
	}
	for _, rec := range res.ToolCalls {
		if !rec.Success {
			t.Fatalf("call %+v failed", rec)
		}
	}
	msgs := s.Requests()[1].Messages
	var results []string
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			results = append(results, m.Content)
		}
	}
	if len(results) != 2 || strings.Contains(results[0], "SHADOW") || results[1] != "first" {
		t.Fatalf("tool results %q: want the weather tool's own answer and the first source's lookup", results)
	}
	var refused []string
	for _, m := range h.records() {
		if m["msg"] == "agent: a tool of a tool source was refused for this run" {
			refused = append(refused, m["reason"])
		}
	}
	if len(refused) != 3 {
		t.Fatalf("refusals logged: %q; want 3 (get_weather, send_email, lookup)", refused)
	}
	for i, name := range []string{`"get_weather"`, `"send_email"`, `"lookup" is already a tool of source 0`} {
		if !strings.Contains(refused[i], name) {
			t.Errorf("refusal %q does not name %s", refused[i], name)
		}
	}
}

// A source that fails or panics leaves the run without its tools, with a
// WARN line; the other sources' tools are offered and the run answers.
func TestToolSourceFailingLeftOut(t *testing.T) {
	h := newRecordLog()
	failing := &listSource{err: errors.New("server down")}
	ok := &listSource{tools: []tool.Tool{echoTool("lookup", "found")}}
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("lookup", `{}`)),
		llmtest.Text("done"),
	)
	o := newOrch(t, s, agent.Config{Logger: slog.New(h), ToolSources: []agent.ToolSource{failing, panicSource{}, ok}})
	res, err := o.HandleMessage(context.Background(), msg("look it up"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Response != "done" || len(res.ToolCalls) != 1 || !res.ToolCalls[0].Success {
		t.Fatalf("result %+v: want lookup to run and the answer", res)
	}
	if got := toolNames(s.Requests()[0].Tools); !slices.Equal(got, []string{"lookup"}) {
		t.Fatalf("offered %v, want [lookup]", got)
	}
	var errs []string
	for _, m := range h.records() {
		if m["msg"] == "agent: a tool source failed; this run goes on without its tools" {
			errs = append(errs, m["source"]+": "+m["err"])
		}
	}
	if len(errs) != 2 || !strings.Contains(errs[0], "0: server down") || !strings.Contains(errs[1], "1: agent: tool source panicked: source broke") {
		t.Fatalf("WARN lines %q: want source 0's error and source 1's panic", errs)
	}

	// Once the source recovers, its tools are back in the next run.
	failing.mu.Lock()
	failing.err, failing.tools = nil, []tool.Tool{echoTool("again", "back")}
	failing.mu.Unlock()
	s2 := llmtest.NewScript(llmtest.Text("ok"))
	o2 := newOrch(t, s2, agent.Config{ToolSources: []agent.ToolSource{failing, ok}})
	if _, err := o2.HandleMessage(context.Background(), msg("hi")); err != nil {
		t.Fatal(err)
	}
	if got := toolNames(s2.Requests()[0].Tools); !slices.Equal(got, []string{"again", "lookup"}) {
		t.Fatalf("offered %v after recovery, want [again lookup]", got)
	}
}

// A source that changes its slice in place, rather than returning a new
// one, has the change seen by the next run.
func TestToolSourceInPlaceChangeSeen(t *testing.T) {
	src := &listSource{tools: []tool.Tool{echoTool("lookup", "found")}}
	s := llmtest.NewScript(llmtest.Text("a"), llmtest.Text("b"), llmtest.Text("c"))
	o := newOrch(t, s, agent.Config{ToolSources: []agent.ToolSource{src}})
	for range 2 {
		if _, err := o.HandleMessage(context.Background(), msg("hi")); err != nil {
			t.Fatal(err)
		}
	}
	src.mu.Lock()
	src.tools[0] = echoTool("other", "x")
	src.mu.Unlock()
	if _, err := o.HandleMessage(context.Background(), msg("hi")); err != nil {
		t.Fatal(err)
	}
	reqs := s.Requests()
	for i, want := range []string{"lookup", "lookup", "other"} {
		if got := toolNames(reqs[i].Tools); !slices.Equal(got, []string{want}) {
			t.Errorf("run %d offered %v, want [%s]", i, got, want)
		}
	}
}
