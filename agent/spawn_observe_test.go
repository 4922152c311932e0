package agent_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// spawnOnce is a model whose coordinator spawns one sub-agent (call "sp")
// that answers "child says hi".
func spawnOnce() *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return llmtest.Text("child says hi")
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("parent done")
		}
		return llmtest.Calls(spawnCall("sp", map[string]any{"task": "say hi"}))
	})
}

// A sub-agent's steps reach the parent's Observer, as a run of its own
// marked with its path (the spawn's call ID); the parent's steps have none.
func TestSpawnAgentObserverPath(t *testing.T) {
	var mu sync.Mutex
	var steps []agent.Step
	obs := agent.ObserverFunc(func(_ context.Context, s agent.Step) {
		mu.Lock()
		steps = append(steps, s)
		mu.Unlock()
	})
	o := newOrch(t, spawnOnce(), agent.Config{Observer: obs, SubAgents: subAgents(agent.SubAgentOptions{})})
	res, err := o.HandleMessage(context.Background(), msg("Go."))
	if err != nil {
		t.Fatal(err)
	}
	var childRun string
	var childAnswer bool
	for _, s := range steps {
		switch {
		case s.RunID == res.RunID:
			if s.Path != nil {
				t.Fatalf("parent step %v has path %v", s.Kind, s.Path)
			}
		case slices.Equal(s.Path, []string{"sp"}):
			if childRun == "" {
				childRun = s.RunID
			} else if s.RunID != childRun {
				t.Fatalf("sub-agent steps of two runs: %s, %s", childRun, s.RunID)
			}
			if s.Kind == agent.StepModelResponse && s.Response != nil && s.Response.Message.Content == "child says hi" {
				childAnswer = true
			}
		default:
			t.Fatalf("step %v of run %s with path %v", s.Kind, s.RunID, s.Path)
		}
	}
	if childRun == "" || !childAnswer {
		t.Fatalf("the sub-agent's steps did not reach the Observer (run %q, answer %v)", childRun, childAnswer)
	}
}

// A sub-agent's events reach the parent's Stream marked with its path.
func TestSpawnAgentStreamPath(t *testing.T) {
	o := newOrch(t, spawnOnce(), agent.Config{SubAgents: subAgents(agent.SubAgentOptions{})})
	var childText, parentText string
	for ev, err := range o.Stream(context.Background(), msg("Go.")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != agent.EventMessageEnd {
			continue
		}
		switch {
		case slices.Equal(ev.Path, []string{"sp"}):
			childText = ev.Text
		case ev.Path == nil:
			parentText = ev.Text
		default:
			t.Fatalf("event with path %v", ev.Path)
		}
	}
	if childText != "child says hi" || parentText != "parent done" {
		t.Fatalf("child %q, parent %q", childText, parentText)
	}
}

// A sub-agent's run span is a child of the spawn's execute_tool span.
func TestSpawnAgentSpanParentage(t *testing.T) {
	tp, rec := recorder(t)
	o := newOrch(t, spawnOnce(), agent.Config{TracerProvider: tp, SubAgents: subAgents(agent.SubAgentOptions{}),
		Telemetry: agent.TelemetryOptions{AgentName: "koi"}})
	if _, err := o.HandleMessage(context.Background(), msg("Go.")); err != nil {
		t.Fatal(err)
	}
	runs := spansNamed(rec, "invoke_agent koi")
	tools := spansNamed(rec, "execute_tool spawn_agent")
	if len(runs) != 2 || len(tools) != 1 {
		t.Fatalf("%d run spans and %d spawn spans, want 2 and 1", len(runs), len(tools))
	}
	var child, parent int
	for i, s := range runs {
		if s.Parent().SpanID() == tools[0].SpanContext().SpanID() {
			child = i
		} else {
			parent = i
		}
	}
	if runs[child].Parent().SpanID() != tools[0].SpanContext().SpanID() {
		t.Fatal("no run span is a child of the spawn's execute_tool span")
	}
	if tools[0].Parent().SpanID() != runs[parent].SpanContext().SpanID() {
		t.Fatal("the spawn's execute_tool span is not under the parent's run span")
	}
}

// Two sub-agents stream at the same time: each one's events reach the
// Stream, one at a time (the race detector checks), with its own path.
func TestSpawnAgentStreamConcurrent(t *testing.T) {
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return llmtest.Text("answer to " + firstUser(req))
		}
		if len(toolResults(req)) == 2 {
			return llmtest.Text("parent done")
		}
		return llmtest.Calls(spawnCall("a", map[string]any{"task": "one"}), spawnCall("b", map[string]any{"task": "two"}))
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{})})
	got := map[string]string{}
	for ev, err := range o.Stream(context.Background(), msg("Go.")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agent.EventMessageEnd && len(ev.Path) == 1 {
			got[ev.Path[0]] = ev.Text
		}
	}
	if got["a"] != "answer to one" || got["b"] != "answer to two" {
		t.Fatalf("sub-agents' answers by path: %v", got)
	}
}
