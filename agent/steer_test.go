package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// gate is a tool that holds the loop mid-run: it reports that it started,
// then waits for release (or its ctx), recording how it ended.
type gate struct {
	started chan struct{}
	release chan struct{}
	mu      sync.Mutex
	ctxErr  error
	calls   int
}

func newGate() *gate {
	return &gate{started: make(chan struct{}, 8), release: make(chan struct{})}
}

func (g *gate) tool(opts ...tool.Option) tool.Tool {
	return tool.New("work", "Do a long piece of work", func(ctx context.Context, in struct{}) (string, error) {
		g.mu.Lock()
		g.calls++
		g.mu.Unlock()
		g.started <- struct{}{}
		select {
		case <-g.release:
			return "work done", nil
		case <-ctx.Done():
			g.mu.Lock()
			g.ctxErr = ctx.Err()
			g.mu.Unlock()
			return "", ctx.Err()
		}
	}, opts...)
}

type outcome struct {
	res *agent.Result
	err error
}

// start runs m in the background; the channel gets its outcome.
func start(o *agent.Orchestrator, m agent.Message) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := o.HandleMessage(context.Background(), m)
		ch <- outcome{res, err}
	}()
	return ch
}

func history(t *testing.T, o *agent.Orchestrator, tenant, conv string) []llm.Message {
	t.Helper()
	h, err := o.History(context.Background(), tenant, conv)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// paired fails the test when a tool result does not answer a call of the
// assistant message before it, or a call goes unanswered.
func checkPaired(t *testing.T, h []llm.Message) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range h {
		switch m.Role {
		case llm.RoleAssistant:
			if len(open) > 0 {
				t.Fatalf("message %d: calls %v unanswered before the next assistant message", i, open)
			}
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case llm.RoleTool:
			if !open[m.ToolCallID] {
				t.Fatalf("message %d: a tool result answers no open call (%q)", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				t.Fatalf("message %d (%s) comes before calls %v are answered", i, m.Role, open)
			}
		}
	}
	if len(open) > 0 {
		t.Fatalf("calls %v unanswered at the end of the history", open)
	}
}

func TestInjectReachesTheRunningLoopAfterTheToolResult(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Done, in metric units."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}})
	done := start(o, msg("Measure the room"))
	<-g.started
	if err := o.Inject(context.Background(), "u1", "c1", "Use metric units please"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	out := <-done
	if out.err != nil || out.res.Status != agent.StatusCompleted {
		t.Fatalf("status %s, err %v", out.res.Status, out.err)
	}
	reqs := s.Requests()
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	prev := reqs[1].Messages[len(reqs[1].Messages)-2]
	if last.Role != llm.RoleUser || !strings.Contains(last.Content, "Use metric units please") || prev.Role != llm.RoleTool {
		t.Fatalf("the second request ends with %s %q after %s; want the injected user text after the tool result", last.Role, last.Content, prev.Role)
	}
	h := history(t, o, "u1", "c1")
	roles := make([]llm.Role, len(h))
	for i, m := range h {
		roles[i] = m.Role
	}
	want := []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleUser, llm.RoleAssistant}
	if len(roles) != len(want) {
		t.Fatalf("history roles %v, want %v", roles, want)
	}
	for i := range want {
		if roles[i] != want[i] {
			t.Fatalf("history roles %v, want %v", roles, want)
		}
	}
	if !strings.Contains(h[3].Content, "Use metric units please") {
		t.Fatalf("the injected text is not saved in order: %q", h[3].Content)
	}
	checkPaired(t, h)
}

func TestCancelStopsTheLoopWhileAToolBlocks(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)))
	var steps []agent.StepKind
	var mu sync.Mutex
	obs := agent.ObserverFunc(func(_ context.Context, st agent.Step) {
		mu.Lock()
		steps = append(steps, st.Kind)
		mu.Unlock()
	})
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}, Observer: obs})
	done := start(o, msg("Do the long thing"))
	<-g.started
	if err := o.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if !errors.Is(out.err, agent.ErrCancelled) || out.res.Status != agent.StatusCancelled {
		t.Fatalf("status %s, err %v; want StatusCancelled and ErrCancelled", out.res.Status, out.err)
	}
	g.mu.Lock()
	ctxErr := g.ctxErr
	g.mu.Unlock()
	if !errors.Is(ctxErr, context.Canceled) {
		t.Fatalf("the tool's ctx ended with %v; want it cancelled", ctxErr)
	}
	h := history(t, o, "u1", "c1")
	if len(h) != 3 {
		t.Fatalf("history has %d messages, want the user's, the call and its (interrupted) result", len(h))
	}
	checkPaired(t, h)
	mu.Lock()
	defer mu.Unlock()
	found := false
	for _, k := range steps {
		found = found || k == agent.StepCancel
	}
	if !found {
		t.Fatalf("no StepCancel among %v", steps)
	}
	// The loop ended: nothing runs any more.
	if err := o.Cancel(context.Background(), "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Cancel after the end: %v, want ErrNotRunning", err)
	}
}

func TestPauseStopsAtTheTurnBoundaryAndTheNextMessageContinues(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Continuing: all done."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}})
	done := start(o, msg("Do the long thing"))
	<-g.started
	if err := o.Pause(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	close(g.release) // the tool under way finishes
	out := <-done
	if out.err != nil || out.res.Status != agent.StatusPaused || out.res.Turns != 1 || out.res.Response != "" {
		t.Fatalf("status %s, turns %d, response %q, err %v; want paused after 1 turn", out.res.Status, out.res.Turns, out.res.Response, out.err)
	}
	if g.ctxErr != nil {
		t.Fatalf("the tool was cancelled (%v); a pause waits for it", g.ctxErr)
	}
	h := history(t, o, "u1", "c1")
	if len(h) != 3 || h[2].Role != llm.RoleTool || h[2].Content != "work done" {
		t.Fatalf("history after the pause: %+v", h)
	}
	res, err := o.HandleMessage(context.Background(), msg("Go on"))
	if err != nil || res.Status != agent.StatusCompleted {
		t.Fatalf("next message: status %s, err %v", res.Status, err)
	}
	req := s.Requests()[1]
	noted := false
	for _, m := range req.Messages {
		noted = noted || (m.Role != llm.RoleUser && strings.Contains(m.Content, "paused the previous request"))
	}
	if !noted {
		t.Fatalf("the run after the pause was not told to continue: %+v", req.Messages)
	}
	for _, m := range history(t, o, "u1", "c1") {
		if strings.Contains(m.Content, "paused the previous request") {
			t.Fatal("the resume note was saved in the history")
		}
	}
	// Only the run right after a pause gets the note.
	s2 := llmtest.NewStrictScript(t, llmtest.Text("a"), llmtest.Text("b"))
	o2 := newOrch(t, s2, agent.Config{})
	for _, text := range []string{"one", "two"} {
		if _, err := o2.HandleMessage(context.Background(), msg(text)); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range s2.Requests()[1].Messages {
		if strings.Contains(m.Content, "paused the previous request") {
			t.Fatal("a run after a completed one got the resume note")
		}
	}
}

func TestSteeringWithNoRunningLoop(t *testing.T) {
	ctl, err := agent.NewMemoryControl(agent.MemoryControlConfig{MaxQueued: 2})
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewStrictScript(t, llmtest.Text("Noted both."))
	o := newOrch(t, s, agent.Config{Control: ctl})
	ctx := context.Background()
	if err := o.Cancel(ctx, "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Cancel: %v, want ErrNotRunning", err)
	}
	if err := o.Pause(ctx, "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Pause: %v, want ErrNotRunning", err)
	}
	if err := o.Inject(ctx, "u1", "c1", "  "); !errors.Is(err, agent.ErrEmptyMessage) {
		t.Fatalf("empty Inject: %v", err)
	}
	if err := o.Inject(ctx, "", "c1", "x"); err == nil {
		t.Fatal("Inject without a tenant was accepted")
	}
	for _, text := range []string{"first aside", "second aside"} {
		if err := o.Inject(ctx, "u1", "c1", text); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Inject(ctx, "u1", "c1", "third"); !errors.Is(err, agent.ErrQueueFull) {
		t.Fatalf("a third Inject into a queue of 2: %v, want ErrQueueFull", err)
	}
	// Another conversation's queue is its own.
	if err := o.Inject(ctx, "u1", "c2", "elsewhere"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.HandleMessage(ctx, msg("And now?")); err != nil {
		t.Fatal(err)
	}
	var users []string
	for _, m := range s.Requests()[0].Messages {
		if m.Role == llm.RoleUser {
			users = append(users, m.Content)
		}
	}
	if len(users) != 3 || !strings.Contains(users[0], "first aside") || !strings.Contains(users[1], "second aside") || users[2] != "And now?" {
		t.Fatalf("the next message's request holds the users' messages %q; want both queued texts, in order, before it", users)
	}
}

func TestQueueBytesBound(t *testing.T) {
	ctl, err := agent.NewMemoryControl(agent.MemoryControlConfig{MaxQueuedBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, llmtest.NewScript(), agent.Config{Control: ctl})
	if err := o.Inject(context.Background(), "u1", "c1", "0123456789x"); !errors.Is(err, agent.ErrQueueFull) {
		t.Fatalf("11 bytes into a queue of 10: %v", err)
	}
	if _, err := agent.NewMemoryControl(agent.MemoryControlConfig{MaxQueued: -1}); !errors.Is(err, agent.ErrInvalidConfig) {
		t.Fatalf("negative MaxQueued: %v", err)
	}
	// Texts for ever more conversations do not grow the process without
	// bound.
	ctl, err = agent.NewMemoryControl(agent.MemoryControlConfig{MaxQueues: 2})
	if err != nil {
		t.Fatal(err)
	}
	o = newOrch(t, llmtest.NewScript(), agent.Config{Control: ctl})
	for _, c := range []string{"c1", "c2"} {
		if err := o.Inject(context.Background(), "u1", c, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Inject(context.Background(), "u1", "c3", "x"); !errors.Is(err, agent.ErrQueueFull) {
		t.Fatalf("a third conversation's queue with MaxQueues 2: %v", err)
	}
	if err := o.Inject(context.Background(), "u1", "c1", "y"); err != nil {
		t.Fatalf("a second text for a queued conversation: %v", err)
	}
}

func TestCancelStopsASpawnedSubAgent(t *testing.T) {
	g := newGate()
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("spawn_agent", `{"task":"do the long thing"}`)),
		llmtest.Calls(llmtest.Call("work", `{}`)), // the sub-agent
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}, SubAgents: agent.SubAgentOptions{Enabled: true}})
	done := start(o, msg("Delegate it"))
	<-g.started
	if err := o.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if out.res.Status != agent.StatusCancelled || !errors.Is(out.err, agent.ErrCancelled) {
		t.Fatalf("status %s, err %v", out.res.Status, out.err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !errors.Is(g.ctxErr, context.Canceled) {
		t.Fatalf("the sub-agent's tool ended with %v; want its ctx cancelled", g.ctxErr)
	}
	checkPaired(t, history(t, o, "u1", "c1"))
}

func TestPauseStopsASpawnedSubAgentWithItsParent(t *testing.T) {
	g := newGate()
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("spawn_agent", `{"task":"do the long thing"}`)),
		llmtest.Calls(llmtest.Call("work", `{}`)), // the sub-agent; paused after it
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}, SubAgents: agent.SubAgentOptions{Enabled: true}})
	done := start(o, msg("Delegate it"))
	<-g.started
	if err := o.Pause(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	out := <-done
	if out.err != nil || out.res.Status != agent.StatusPaused {
		t.Fatalf("status %s, err %v", out.res.Status, out.err)
	}
	if n := s.Calls(); n != 2 {
		t.Fatalf("%d model calls; the sub-agent and its parent should stop after the tool (2)", n)
	}
	checkPaired(t, history(t, o, "u1", "c1"))
}

func TestForgetDropsInjectedTexts(t *testing.T) {
	s := llmtest.NewStrictScript(t, llmtest.Text("Hello."))
	o := newOrch(t, s, agent.Config{})
	ctx := context.Background()
	if err := o.Inject(ctx, "u1", "c1", "my card number is 4111"); err != nil {
		t.Fatal(err)
	}
	if err := o.Forget(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := o.HandleMessage(ctx, msg("Hi")); err != nil {
		t.Fatal(err)
	}
	for _, m := range s.Requests()[0].Messages {
		if strings.Contains(m.Content, "4111") {
			t.Fatal("a text injected into a forgotten conversation reached its next run")
		}
	}
}
