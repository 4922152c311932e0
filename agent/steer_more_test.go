package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A paused run keeps its plan: the next message's run has it.
func TestPauseKeepsThePlan(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call(agent.UpdatePlanTool, planV1), llmtest.Call("work", `{}`)),
		llmtest.Text("Continuing with step 2."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}, Plan: agent.PlanOptions{Enabled: true}})
	done := start(o, msg("Plan my trip"))
	<-g.started
	if err := o.Pause(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	if out := <-done; out.res.Status != agent.StatusPaused || out.res.Plan == nil {
		t.Fatalf("paused run: status %s, plan %v, err %v", out.res.Status, out.res.Plan, out.err)
	}
	res, err := o.HandleMessage(context.Background(), msg("Go on"))
	if err != nil || res.Plan == nil || !strings.Contains(res.Plan.Markdown(), "Find flights") {
		t.Fatalf("the run after the pause: plan %v, err %v", res.Plan, err)
	}
}

// Observers and the run's span see each steering action.
func TestSteeringIsObservedAndTraced(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)))
	var mu sync.Mutex
	var steps []agent.Step
	tp, rec := recorder(t)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}, TracerProvider: tp,
		Observer: agent.ObserverFunc(func(_ context.Context, st agent.Step) {
			mu.Lock()
			steps = append(steps, st)
			mu.Unlock()
		})})
	done := start(o, msg("Long task"))
	<-g.started
	ctx := context.Background()
	if err := o.Inject(ctx, "u1", "c1", "and hurry"); err != nil {
		t.Fatal(err)
	}
	if err := o.Pause(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	if out := <-done; out.res.Status != agent.StatusPaused {
		t.Fatalf("status %s, err %v", out.res.Status, out.err)
	}
	mu.Lock()
	var kinds []agent.StepKind
	var injectedText string
	for _, st := range steps {
		if st.Kind == agent.StepInject || st.Kind == agent.StepPause {
			kinds = append(kinds, st.Kind)
		}
		if st.Kind == agent.StepInject {
			injectedText = st.Text
		}
	}
	mu.Unlock()
	// A pause at a boundary wins over texts injected at the same one: they
	// wait for the next message.
	if !slices.Equal(kinds, []agent.StepKind{agent.StepPause}) {
		t.Fatalf("steps %v, want the pause", kinds)
	}
	if injectedText != "" {
		t.Fatalf("StepInject %q", injectedText)
	}
	span := oneSpan(t, rec, "invoke_agent valet")
	found := false
	for _, ev := range span.Events() {
		if ev.Name == "valet.steer" {
			found = true
		}
	}
	if !found {
		t.Fatal("no valet.steer event on the run's span")
	}
	if got := agent.StepPause.String(); got != "pause" {
		t.Fatalf("StepPause.String() = %q", got)
	}
}

// failingControl is a Control whose every call fails: Redis is down.
type failingControl struct{ *agent.MemoryControl }

var errDown = errors.New("control backend down")

func (failingControl) Begin(context.Context, string, string, string, bool) (agent.Begun, error) {
	return agent.Begun{}, errDown
}
func (failingControl) Running(context.Context, string, string) (string, error) { return "", errDown }
func (failingControl) Push(context.Context, string, string, string) error      { return errDown }
func (failingControl) Subscribe(string, string, string, func(agent.Signal)) func() {
	return func() {}
}

// A dying Control does not fail the user's message: the run is only not
// steerable, and steering calls say why.
func TestADyingControlLeavesTheRunUnsteerable(t *testing.T) {
	s := llmtest.NewStrictScript(t, llmtest.Text("Hello."))
	o := newOrch(t, s, agent.Config{Control: failingControl{mustMemoryControl(t)}, Loop: agent.LoopConfig{RouteWhileRunning: true}})
	res, err := o.HandleMessage(context.Background(), msg("Hi"))
	if err != nil || res.Status != agent.StatusCompleted {
		t.Fatalf("status %s, err %v", res.Status, err)
	}
	if err := o.Inject(context.Background(), "u1", "c1", "x"); !errors.Is(err, errDown) {
		t.Fatalf("Inject: %v", err)
	}
	if err := o.Cancel(context.Background(), "u1", "c1"); !errors.Is(err, errDown) || errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Cancel: %v", err)
	}
}

// A routed message streamed ends with the Result saying it was handed
// over, with no text of its own.
func TestRoutedStreamEndsInjected(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Done."),
	).On(llm.PurposeRoute, llmtest.Text("correction"))
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}, Loop: routing})
	done := start(o, msg("Long task"))
	<-g.started
	var last agent.Event
	var n int
	for ev, err := range o.Stream(context.Background(), msg("also check the attic")) {
		if err != nil {
			t.Fatal(err)
		}
		last, n = ev, n+1
	}
	if n != 1 || last.Type != agent.EventExecutionEnd || last.Result.Status != agent.StatusInjected {
		t.Fatalf("%d events, last %+v", n, last)
	}
	close(g.release)
	if out := <-done; out.err != nil {
		t.Fatal(out.err)
	}
}

func mustMemoryControl(t *testing.T) *agent.MemoryControl {
	t.Helper()
	c, err := agent.NewMemoryControl(agent.MemoryControlConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
