package delegatetest

import (
	"errors"
	"testing"

	"github.com/valetkit/valet/agent/delegate"
)

// canceller returns eng as a delegate.Canceller, or skips the test.
func canceller(t *testing.T, eng delegate.Engine) delegate.Canceller {
	t.Helper()
	c, ok := eng.(delegate.Canceller)
	if !ok {
		t.Skipf("%T is not a delegate.Canceller", eng)
	}
	return c
}

// checkCancelled fails the test unless graph id is stored cancelled, every
// task cancelled without a result, undelivered.
func checkCancelled(t *testing.T, eng delegate.Engine, tenant, id string) {
	t.Helper()
	got, err := eng.Graph(ctxFor(t), tenant, id)
	if err != nil {
		t.Fatalf("Graph: %v", err)
	}
	if got.Status != delegate.GraphCancelled || got.EndedAt.IsZero() || got.Delivered {
		t.Fatalf("cancelled graph is %s (ended %v, delivered %v), want cancelled, ended, undelivered", got.Status, got.EndedAt, got.Delivered)
	}
	for _, task := range got.Tasks {
		if task.Status != delegate.TaskCancelled || task.Error != delegate.CancelledError || task.ResultID != "" || task.EndedAt.IsZero() {
			t.Errorf("task %s of the cancelled graph = %s (error %q, result %q, ended %v), want cancelled with no result",
				task.ID, task.Status, task.Error, task.ResultID, task.EndedAt)
		}
		if _, err := eng.Result(ctxFor(t), tenant, delegate.ResultID(id, task.ID)); !errors.Is(err, delegate.ErrNotFound) {
			t.Errorf("result of cancelled task %s: %v, want ErrNotFound", task.ID, err)
		}
	}
}

// testCancel: Cancel ends the conversation's running graph at once — its
// runs under way get a cancelled ctx and their outputs are dropped, its
// pending task never starts, it is not delivered — and leaves alone the
// graph of the conversation that ended before it, another conversation's
// graph, and the graph submitted after it.
func testCancel(t *testing.T, eng delegate.Engine) {
	c := canceller(t, eng)
	ctx := ctxFor(t)
	exec := &ScriptedExecutor{Steps: map[string]Step{
		"a": {Gate: make(chan struct{})}, "c": {Gate: make(chan struct{})},
	}}
	start(t, eng, exec)
	if n, err := c.Cancel(ctx, "alice", "conv-alice"); err != nil || n != 0 {
		t.Fatalf("Cancel with nothing running = %d, %v; want 0, nil", n, err)
	}
	before := graphOf(t, "alice", spec("z"))
	submit(t, eng, before)
	delivered(t, eng, exec, before)

	g := graphOf(t, "alice", spec("a"), spec("b", "a"), spec("c"))
	submit(t, eng, g)
	await(t, exec, "tasks a and c running", func() bool { return exec.InFlight() == 2 })
	if n, err := c.Cancel(ctx, "alice", "other-conversation"); err != nil || n != 0 {
		t.Fatalf("Cancel of another conversation = %d, %v; want 0, nil", n, err)
	}
	if n, err := c.Cancel(ctx, "bob", g.ConversationID); err != nil || n != 0 {
		t.Fatalf("Cancel of another tenant = %d, %v; want 0, nil", n, err)
	}
	if got, err := eng.Graph(ctx, "alice", g.ID); err != nil || got.Status != delegate.GraphRunning {
		t.Fatalf("graph after another conversation's Cancel = %s, %v; want running", got.Status, err)
	}
	n, err := c.Cancel(ctx, "alice", g.ConversationID)
	if err != nil || n != 1 {
		t.Fatalf("Cancel = %d, %v; want 1 graph cancelled", n, err)
	}
	checkCancelled(t, eng, "alice", g.ID) // at once, before the runs returned
	// The gated runs return only when their ctx ends.
	await(t, exec, "the cancelled runs' ctx to end", func() bool { return exec.InFlight() == 0 })
	if n, err := c.Cancel(ctx, "alice", g.ConversationID); err != nil || n != 0 {
		t.Fatalf("second Cancel = %d, %v; want 0: nothing left running", n, err)
	}

	// Submitted after the Cancel: it runs and is delivered, which also
	// shows the engine past the cancelled runs' ends.
	after := graphOf(t, "alice", spec("w"))
	submit(t, eng, after)
	if got := delivered(t, eng, exec, after); got.Status != delegate.GraphCompleted {
		t.Fatalf("graph submitted after Cancel is %s, want completed", got.Status)
	}
	checkCancelled(t, eng, "alice", g.ID)
	if got, err := eng.Graph(ctx, "alice", before.ID); err != nil || got.Status != delegate.GraphCompleted || !got.Delivered {
		t.Errorf("graph ended before Cancel = %s delivered %v, %v; want it left completed and delivered", got.Status, got.Delivered, err)
	}
	count := map[string]int{}
	for _, r := range runsOf(exec, "alice", g.ID) {
		count[r.TaskID]++
	}
	if count["a"] != 1 || count["c"] != 1 || count["b"] != 0 {
		t.Errorf("runs of the cancelled graph %v, want a and c once (cut short), b never", count)
	}
	for _, d := range exec.Deliveries() {
		if d.ID == g.ID {
			t.Error("the cancelled graph was delivered")
		}
	}
}

// testCancelOtherReplica: a Cancel made through an engine value that is
// not running the task (another replica's, whose Run is not even started)
// cancels the run on the replica running it; a restart then neither runs
// the graph's tasks again nor delivers it.
func testCancelOtherReplica(t *testing.T, newEngine func() delegate.Engine) {
	one, two := newEngine(), newEngine()
	c := canceller(t, two)
	exec := &ScriptedExecutor{Steps: map[string]Step{"a": {Gate: make(chan struct{})}}}
	stop := start(t, one, exec)
	g := graphOf(t, "alice", spec("a"), spec("b", "a"))
	submit(t, one, g)
	await(t, exec, "task a running on the first engine", func() bool { return exec.InFlight() == 1 })
	if n, err := c.Cancel(ctxFor(t), "alice", g.ConversationID); err != nil || n != 1 {
		t.Fatalf("Cancel on the other engine = %d, %v; want 1", n, err)
	}
	await(t, exec, "the run on the first engine to see its ctx end", func() bool { return exec.InFlight() == 0 })
	stop()

	third := newEngine()
	again := &ScriptedExecutor{}
	start(t, third, again)
	other := graphOf(t, "bob", spec("x"))
	submit(t, third, other)
	delivered(t, third, again, other)
	checkCancelled(t, third, "alice", g.ID)
	if rs := runsOf(again, "alice", g.ID); len(rs) != 0 {
		t.Errorf("the restart ran %d tasks of the cancelled graph", len(rs))
	}
	for _, d := range append(exec.Deliveries(), again.Deliveries()...) {
		if d.ID == g.ID {
			t.Error("the cancelled graph was delivered")
		}
	}
}
