package trigger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// The reason a refusing executor gives the user, and the figures its
// error keeps for operators.
const (
	refusalReason = "Your daily spending limit is reached. Please try again tomorrow."
	refusalFigure = "all tenants spent $1300.00 today"
)

// refusing refuses every run, as agentexec does for a SpendGuard's
// refusal.
func refusing(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
	return trigger.ExecResult{Result: refusalReason}, fmt.Errorf("%w: spend limit reached: %s", trigger.ErrRefused, refusalFigure)
}

// refusedRun reports whether the task has n runs, the newest refused
// and the task moved on past it (LastRun set to its start).
func (h *harness) refusedRun(t *testing.T, tenant, id string, n int) func() bool {
	return func() bool {
		runs := h.runs(t, tenant, id)
		if len(runs) != n || runs[0].Status != trigger.RunRefused {
			return false
		}
		task, err := h.e.Get(h.ctx, tenant, id)
		return err == nil && task.LastRun.Equal(runs[0].StartedAt)
	}
}

// checkRefused checks that r is a refused run on its first attempt that
// keeps the user's reason as its result and the executor's error.
func checkRefused(t *testing.T, r trigger.Run) {
	t.Helper()
	if r.Status != trigger.RunRefused || r.Attempt != 1 || r.Result != refusalReason || !strings.Contains(r.Error, refusalFigure) ||
		!strings.Contains(r.Error, trigger.ErrRefused.Error()) {
		t.Fatalf("refused run = %+v", r)
	}
}

// A daily run the executor refuses (ErrRefused) is not tried again and
// does not kill the task: it stays ACTIVE, due at its next time, and
// runs then. The user is told once, with the reason for them, never the
// error's figures; the Observer hears the refusal.
func TestRefusedScheduleRunKeepsTheSchedule(t *testing.T) {
	chat := &notes{}
	var mu sync.Mutex
	var steps []trigger.Lifecycle
	h := newHarness(t, trigger.Config{
		Notifiers: map[string]trigger.Notifier{"chat": chat},
		Observer: func(l trigger.Lifecycle) {
			mu.Lock()
			steps = append(steps, l)
			mu.Unlock()
		},
	})
	h.exec.setFn(refusing)
	task := scheduleTask("t1", "digest", trigger.Schedule{Cron: "0 9 * * *"})
	task.Output = trigger.Output{Channel: "chat", Target: "u1"}
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Minute}
	h.create(t, task)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "the refused run", h.refusedRun(t, "t1", "digest", 1))
	checkRefused(t, h.runs(t, "t1", "digest")[0])
	got := h.get(t, "t1", "digest")
	if got.Status != trigger.StatusActive || !got.NextRun.Equal(at(2, 9, 0)) {
		t.Fatalf("after a refused run the task is %s, next run %s; want ACTIVE, next run %s", got.Status, got.NextRun, at(2, 9, 0))
	}
	waitFor(t, "the refusal notice", func() bool { return len(chat.all()) == 1 })
	if n := chat.all()[0]; n.Kind != trigger.NotifyRefused || n.Text != refusalReason || n.Target != "u1" || n.TaskName != "task digest" {
		t.Fatalf("notice %+v", n)
	}

	// The next day the limit has reset: the task runs, on its schedule.
	// A retry of the refused run, had one been waiting a backoff, would
	// have run by then too.
	h.exec.setFn(nil)
	h.advanceTo(t, at(2, 9, 0))
	waitFor(t, "the next day's run", h.finished(t, "t1", "digest", 2, trigger.RunSucceeded))
	if n := len(h.exec.Calls()); n != 2 {
		t.Fatalf("%d executions, want 2: the refused run was tried again", n)
	}
	waitFor(t, "the next day's result", func() bool { return len(chat.all()) == 2 })
	if n := chat.all()[1]; n.Kind != trigger.NotifyResult {
		t.Fatalf("after the refusal notice, the user was told %+v; want the next day's result", n)
	}

	want := []trigger.LifecycleKind{trigger.LifecycleScheduled, trigger.LifecycleStarted, trigger.LifecycleRefused,
		trigger.LifecycleScheduled, trigger.LifecycleStarted, trigger.LifecycleCompleted}
	waitFor(t, "the observer", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(steps) >= len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	for i, k := range want {
		if steps[i].Kind != k {
			t.Fatalf("observer heard %v, want %v", steps, want)
		}
	}
	if r := steps[2]; r.RunID != trigger.RunID("digest", at(1, 9, 0)) || r.Attempt != 1 || !strings.Contains(r.Err, refusalFigure) {
		t.Fatalf("the refused step = %+v", r)
	}
	if !steps[3].Due.Equal(at(2, 9, 0)) {
		t.Fatalf("after the refusal the task is scheduled for %s, want %s", steps[3].Due, at(2, 9, 0))
	}
}

// A one-time task whose run is refused has no time left: it ends
// EXPIRED (it never did its work), not COMPLETED and not DEAD.
func TestRefusedOneTimeTaskExpires(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(refusing)
	task := scheduleTask("t1", "once", trigger.Schedule{At: at(1, 10, 0)})
	task.Retry = trigger.Retry{MaxAttempts: 3}
	h.create(t, task)
	h.start()
	h.advanceTo(t, at(1, 10, 0))
	waitFor(t, "the task EXPIRED", func() bool { return h.get(t, "t1", "once").Status == trigger.StatusExpired })
	runs := h.runs(t, "t1", "once")
	if len(runs) != 1 {
		t.Fatalf("runs = %+v", runs)
	}
	checkRefused(t, runs[0])
	if got := h.get(t, "t1", "once"); !got.NextRun.IsZero() || !got.LastRun.Equal(runs[0].StartedAt) {
		t.Fatalf("task = %+v", got)
	}
	if n := len(h.exec.Calls()); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}

// An event task whose run is refused stays ACTIVE and is not tried
// again: the next event fires it.
func TestRefusedEventRunIsNotRetried(t *testing.T) {
	chat := &notes{}
	h := newHarness(t, trigger.Config{Notifiers: map[string]trigger.Notifier{"chat": chat}})
	var calls atomic.Int32
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if calls.Add(1) == 1 {
			return refusing(ctx, run)
		}
		return trigger.ExecResult{Result: "handled " + run.Event.ID}, nil
	})
	task := eventTask("t1", "hook", trigger.Trigger{Type: "push"})
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Minute}
	task.Output = trigger.Output{Channel: "chat"}
	h.create(t, task)
	h.start()
	ctx := context.Background()
	if err := h.e.Publish(ctx, trigger.Event{ID: "e1", TenantID: "t1", Type: "push"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the refused run", h.refusedRun(t, "t1", "hook", 1))
	checkRefused(t, h.runs(t, "t1", "hook")[0])
	if got := h.get(t, "t1", "hook"); got.Status != trigger.StatusActive {
		t.Fatalf("after a refused event run the task is %s", got.Status)
	}
	// The refusal's notice goes out on its own goroutine: wait for it, so
	// that the notices' order below is the runs' order.
	waitFor(t, "the refusal's notice", func() bool { return len(chat.all()) == 1 })
	// Past any backoff, then the next event: it alone runs.
	h.clk.Advance(time.Hour)
	if err := h.e.Publish(ctx, trigger.Event{ID: "e2", TenantID: "t1", Type: "push"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the next event's run", h.finishedN(t, "t1", "hook", 2))
	runs := h.runs(t, "t1", "hook")
	if n := calls.Load(); n != 2 || runs[0].ID != trigger.EventRunID("hook", "e2") || runs[0].Status != trigger.RunSucceeded {
		t.Fatalf("%d executions, runs %+v; want the refused run once, then e2's", n, runs)
	}
	waitFor(t, "both notices", func() bool { return len(chat.all()) == 2 })
	if n := chat.all(); n[0].Kind != trigger.NotifyRefused || n[0].Text != refusalReason || n[1].Kind != trigger.NotifyResult {
		t.Fatalf("notices %+v", n)
	}
}

// A condition task whose edge's run is refused has used the edge: it
// stays ACTIVE and runs again on the next false→true edge, not at every
// poll while the condition holds.
func TestRefusedConditionRunWaitsForTheNextEdge(t *testing.T) {
	var polls atomic.Int32
	h := newHarness(t, trigger.Config{Conditions: map[string]trigger.Condition{
		"always": func(context.Context, *trigger.Task) (bool, error) { polls.Add(1); return true, nil },
	}})
	h.exec.setFn(refusing)
	task := conditionTask("t1", "c", "always")
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Second}
	h.create(t, task)
	h.start()
	waitFor(t, "the refused run", h.refusedRun(t, "t1", "c", 1))
	if got := h.get(t, "t1", "c"); got.Status != trigger.StatusActive || !got.ConditionMet {
		t.Fatalf("after the refused run: %+v", got)
	}
	for i := range 3 {
		h.advanceTo(t, h.clk.Now().Add(time.Minute))
		want := int32(i + 2)
		waitFor(t, "a poll", func() bool { return polls.Load() >= want })
		waitFor(t, "the poll recorded", func() bool {
			return h.get(t, "t1", "c").NextRun.After(h.clk.Now()) && len(h.runsRunning(t, "t1", "c")) == 0
		})
	}
	if n := len(h.exec.Calls()); n != 1 {
		t.Fatalf("%d executions while the condition held, want 1", n)
	}
}

// RunNow of a refused run returns it refused, not dead, tells the
// channel the reason, and leaves the task as it was.
func TestRefusedRunNow(t *testing.T) {
	chat := &notes{}
	h := newHarness(t, trigger.Config{Notifiers: map[string]trigger.Notifier{"chat": chat}})
	h.exec.setFn(refusing)
	task := scheduleTask("t1", "digest", trigger.Schedule{Cron: "0 9 * * *"})
	task.Output = trigger.Output{Channel: "chat"}
	h.create(t, task)
	r, err := h.e.RunNow(context.Background(), "t1", "digest")
	if err != nil {
		t.Fatal(err)
	}
	checkRefused(t, r)
	if got := h.get(t, "t1", "digest"); got.Status != trigger.StatusActive || !got.NextRun.Equal(at(1, 9, 0)) {
		t.Fatalf("after a refused RunNow: %+v", got)
	}
	n := chat.all()
	if len(n) != 1 || n[0].Kind != trigger.NotifyRefused || n[0].Text != refusalReason {
		t.Fatalf("notices %+v", n)
	}
}

// A refusal is a run status of its own, and ErrRefused a sentinel an
// executor wraps.
func TestRunRefusedIsAStatus(t *testing.T) {
	if err := trigger.RunRefused.Check(); err != nil {
		t.Fatal(err)
	}
	if err := fmt.Errorf("agentexec: %w", trigger.ErrRefused); !errors.Is(err, trigger.ErrRefused) {
		t.Fatal("a wrapped ErrRefused is not ErrRefused")
	}
}
