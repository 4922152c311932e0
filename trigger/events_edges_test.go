package trigger_test

// Failing tests from the outside review of the event/condition triggers
// (e5e9aca) and of routes, notifiers and the observer (4b598b7). Each
// test fails because of the defect its comment names.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/trigger"
)

// A failed event run waiting out its backoff holds one of the
// MaxConcurrent slots for the whole backoff (runOneOff sleeps inside the
// goroutine that fireEvent gave the slot to). One tenant's failing
// webhook task starves every other run, and the event subscriber too.
func TestEventBackoffHoldsASlot(t *testing.T) {
	h := newHarness(t, trigger.Config{MaxConcurrent: 1})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if run.Task.ID == "hook" {
			return trigger.ExecResult{}, errors.New("webhook target down")
		}
		return trigger.ExecResult{Result: "ok"}, nil
	})
	hook := eventTask("t1", "hook", trigger.Trigger{Type: "push"})
	hook.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Hour}
	h.create(t, hook)
	h.create(t, scheduleTask("t2", "other", trigger.Schedule{Every: time.Hour}))
	h.start()
	if err := h.e.Publish(context.Background(), trigger.Event{ID: "e1", TenantID: "t1", Type: "push"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "attempt 1 failed", func() bool {
		runs := h.runs(t, "t1", "hook")
		return len(runs) == 1 && runs[0].Status == trigger.RunFailed
	})
	// Nothing executes now: the event run only waits an hour.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := h.e.RunNow(ctx, "t2", "other"); err != nil {
		t.Fatalf("another tenant's RunNow while an event run merely waits out its backoff: %v", err)
	}
}

// A chained run (RouteChain, in memory) is given the
// context.WithoutCancel ctx of deliver: Engine.Run does not return when
// its ctx ends while the chained task waits out a backoff (or while its
// executor waits for ctx).
func TestChainedRunIgnoresStop(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if run.Task.ID == "b" {
			return trigger.ExecResult{}, errors.New("b fails")
		}
		return trigger.ExecResult{Result: "a done"}, nil
	})
	a := scheduleTask("t1", "a", trigger.Schedule{Cron: "0 9 * * *"})
	a.Route = trigger.Route{Kind: trigger.RouteChain, Next: "b"}
	b := scheduleTask("t1", "b", trigger.Schedule{Cron: "0 0 1 1 *"})
	b.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Hour}
	h.create(t, b)
	h.create(t, a)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "b's first attempt failed", func() bool {
		runs := h.runs(t, "t1", "b")
		return len(runs) == 1 && runs[0].Status == trigger.RunFailed
	})
	done := make(chan error, 1)
	go func() { done <- h.stop() }()
	select {
	case <-done:
		return
	case <-time.After(2 * time.Second):
	}
	// Let it go, so the test does not leak: move the clock past the
	// backoffs.
	for {
		h.clk.Advance(3 * time.Hour)
		select {
		case <-done:
			t.Fatal("Engine.Run did not return after its ctx ended: the chained run slept through its backoff")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// blockingMemory is a MemoryWriter that honours ctx and is otherwise
// slow (a remote vector store).
type blockingMemory struct {
	called  chan struct{}
	release chan struct{}
	once    sync.Once
}

func (m *blockingMemory) Remember(ctx context.Context, tenantID string, items ...memory.Item) ([]string, error) {
	m.once.Do(func() { close(m.called) })
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.release:
		return nil, errors.New("released")
	}
}

// deliver hands the memory writer context.WithoutCancel(ctx) with no
// deadline at all: a slow memory store keeps Engine.Run from returning,
// forever (a notifier similarly, for RunTimeout: 10 minutes by default).
func TestMemoryRouteBlocksStop(t *testing.T) {
	mem := &blockingMemory{called: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, trigger.Config{Memory: mem})
	task := scheduleTask("t1", "fares", trigger.Schedule{Cron: "0 9 * * *"})
	task.Route = trigger.Route{Kind: trigger.RouteMemory}
	h.create(t, task)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	select {
	case <-mem.called:
	case <-time.After(10 * time.Second):
		t.Fatal("memory not written")
	}
	done := make(chan error, 1)
	go func() { done <- h.stop() }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		close(mem.release)
		<-done
		t.Fatal("Engine.Run did not return after its ctx ended: the memory writer's ctx is never cancelled and has no deadline")
	}
}

// Dedupe of an event rests on the run history, which a MemoryStore
// bounds (MaxRuns, 100 by default): an event redelivered after MaxRuns
// other events of the task fires again.
func TestEventDedupeForgetsAfterMaxRuns(t *testing.T) {
	h := newHarness(t, trigger.Config{Store: &trigger.MemoryStore{MaxRuns: 2}, MaxConcurrent: 1})
	h.create(t, eventTask("t1", "hook", trigger.Trigger{Type: "push"}))
	h.start()
	ctx := context.Background()
	for _, id := range []string{"e1", "e2", "e3", "e1", "e4"} {
		if err := h.e.Publish(ctx, trigger.Event{ID: id, TenantID: "t1", Type: "push"}); err != nil {
			t.Fatal(err)
		}
	}
	// One slot: e4 executes only after a second run of e1, if any, ended.
	waitFor(t, "e4's run", func() bool {
		for _, c := range h.exec.Calls() {
			if c.Event != nil && c.Event.ID == "e4" {
				return true
			}
		}
		return false
	})
	n := 0
	for _, c := range h.exec.Calls() {
		if c.Event.ID == "e1" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("event e1 fired %d times, want once per event id", n)
	}
}

// EventRunID(task, event) can be up to 2*MaxIDLen+7 bytes but a Run ID
// may be MaxIDLen: a valid event with a long id (a Gmail Message-ID, a
// URL) for a task with a longish id is accepted by Publish and never
// fires; AddRun fails with ErrInvalid on every delivery until the bus
// drops it.
func TestLongEventIDNeverFires(t *testing.T) {
	bus := &trigger.MemoryBus{MaxDeliveries: 1}
	h := newHarness(t, trigger.Config{Bus: bus})
	id := strings.Repeat("t", 150)
	h.create(t, eventTask("t1", id, trigger.Trigger{Source: "gmail"}))
	h.start()
	evID := "<" + strings.Repeat("m", 120) + "@mail.gmail.com>"
	if err := h.e.Publish(context.Background(), trigger.Event{ID: evID, TenantID: "t1", Source: "gmail"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the bus to settle the event", func() bool { return bus.Len() == 0 })
	time.Sleep(50 * time.Millisecond)
	if n := len(h.exec.Calls()); n != 1 {
		t.Fatalf("a valid event (id %d bytes) for task id %d bytes: %d runs, want 1", len(evID), len(id), n)
	}
}

// ChainRunID nests the previous run's id, so run ids grow with each hop:
// a chain of three tasks with 100-byte ids breaks at its second hop
// (the run id is over MaxIDLen), far below MaxChainDepth.
func TestChainRunIDOverflows(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	ids := []string{strings.Repeat("a", 100), strings.Repeat("b", 100), strings.Repeat("c", 100)}
	for i := len(ids) - 1; i >= 0; i-- {
		x := scheduleTask("t1", ids[i], trigger.Schedule{Cron: "0 0 1 1 *"})
		if i+1 < len(ids) {
			x.Route = trigger.Route{Kind: trigger.RouteChain, Next: ids[i+1]}
		}
		h.create(t, x)
	}
	if _, err := h.e.RunNow(context.Background(), "t1", ids[0]); err != nil {
		t.Fatal(err)
	}
	if n := len(h.runs(t, "t1", ids[2])); n != 1 {
		rb := h.runs(t, "t1", ids[1])
		t.Fatalf("the third task of a chain ran %d times, want 1; second task's runs: %+v", n, rb)
	}
}

// Every task an event fires gets the same Data map (fireEvent passes
// &ev, and ev's Data is one map): what one task's executor does to it
// the next task's executor sees (and two running at once race on the
// map, a fatal error in Go).
func TestEventDataSharedAcrossTasks(t *testing.T) {
	h := newHarness(t, trigger.Config{MaxConcurrent: 1})
	var mu sync.Mutex
	seen := map[string]any{}
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		seen[run.Task.ID] = run.Event.Data["subject"]
		mu.Unlock()
		run.Event.Data["subject"] = "redacted by " + run.Task.ID // the executor's own copy, it thinks
		return trigger.ExecResult{Result: "ok"}, nil
	})
	h.create(t, eventTask("t1", "a", trigger.Trigger{Source: "gmail"}))
	h.create(t, eventTask("t1", "b", trigger.Trigger{Source: "gmail"}))
	h.start()
	if err := h.e.Publish(context.Background(), trigger.Event{ID: "m1", TenantID: "t1", Source: "gmail",
		Data: map[string]any{"subject": "hello"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both runs", func() bool { return len(h.exec.Calls()) == 2 })
	mu.Lock()
	defer mu.Unlock()
	for id, s := range seen {
		if s != "hello" {
			t.Errorf("task %s saw subject %q, want the event's %q", id, s, "hello")
		}
	}
}

// RunNow's failure path tells the Observer "failed" only: a run that
// failed because it exceeded its budget (ExecResult.BudgetExceeded) is
// never reported as budget_exceeded (fireOnce and runOneOff go through
// ended, which does).
func TestRunNowFailureDropsBudgetStep(t *testing.T) {
	var mu sync.Mutex
	var steps []string
	h := newHarness(t, trigger.Config{Observer: func(l trigger.Lifecycle) {
		mu.Lock()
		steps = append(steps, string(l.Kind))
		mu.Unlock()
	}})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{BudgetExceeded: true}, errors.New("budget exhausted")
	})
	h.create(t, scheduleTask("t1", "x", trigger.Schedule{Every: time.Hour}))
	if _, err := h.e.RunNow(context.Background(), "t1", "x"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failed step", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(steps, " "), "failed")
	})
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(strings.Join(steps, " "), "budget_exceeded") {
		t.Fatalf("observer heard %v: no budget_exceeded for a run that exceeded its budget", steps)
	}
}

// An event run cut short by the engine stopping is recorded failed
// ("interrupted") after the bus acknowledged the event: when Run starts
// again nothing tries it again (a scheduled run in the same spot is kept
// due and retried at the next start).
func TestInterruptedEventRunIsLost(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	var first sync.Once
	started := make(chan struct{})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		block := false
		first.Do(func() { block = true; close(started) })
		if block {
			<-ctx.Done()
			return trigger.ExecResult{}, ctx.Err()
		}
		return trigger.ExecResult{Result: "ok"}, nil
	})
	h.create(t, eventTask("t1", "hook", trigger.Trigger{Type: "push"}))
	h.start()
	if err := h.e.Publish(context.Background(), trigger.Event{ID: "e1", TenantID: "t1", Type: "push"}); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	h.start() // the same engine, store and bus
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if runs := h.runs(t, "t1", "hook"); len(runs) == 1 && runs[0].Status == trigger.RunSucceeded {
			return
		}
		h.clk.Advance(time.Minute)
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the interrupted event run after a restart: %+v", h.runs(t, "t1", "hook"))
}

// A payload nested deeper than encoding/json decodes (10000 levels, 60
// KB) passes Publish, which only encodes it, and then fails to decode
// on every delivery until the bus drops it: Publish said nil, the event
// never fires. (MemoryBus, 73e0107; Publish should refuse it.)
func TestDeeplyNestedEventAcceptedThenDropped(t *testing.T) {
	bus := &trigger.MemoryBus{MaxDeliveries: 1}
	h := newHarness(t, trigger.Config{Bus: bus})
	h.create(t, eventTask("t1", "hook", trigger.Trigger{Type: "push"}))
	h.start()
	data := map[string]any{"leaf": "x"}
	for range 10001 {
		data = map[string]any{"a": data}
	}
	err := h.e.Publish(context.Background(), trigger.Event{ID: "deep", TenantID: "t1", Type: "push", Data: data})
	if err != nil {
		return // refused up front: fine
	}
	waitFor(t, "the bus to settle the event", func() bool { return bus.Len() == 0 })
	time.Sleep(50 * time.Millisecond)
	if n := len(h.exec.Calls()); n != 1 {
		t.Fatalf("Publish accepted a 10001-deep payload (nil error) and the event fired %d times", n)
	}
}
