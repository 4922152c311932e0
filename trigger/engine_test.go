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

	"go.uber.org/goleak"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
)

// 08:00 UTC, Monday 1 June 2026.
var engineBase = time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)

// fakeExec records its calls and answers with fn (success by default).
type fakeExec struct {
	mu    sync.Mutex
	calls []trigger.ExecRun
	fn    func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error)
}

func (f *fakeExec) Execute(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, run)
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, run)
	}
	return trigger.ExecResult{Result: "done " + run.RunID, Usage: trigger.Usage{Tokens: 3}}, nil
}

func (f *fakeExec) setFn(fn func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error)) {
	f.mu.Lock()
	f.fn = fn
	f.mu.Unlock()
}

func (f *fakeExec) Calls() []trigger.ExecRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]trigger.ExecRun(nil), f.calls...)
}

func failing(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
	return trigger.ExecResult{}, fmt.Errorf("boom %d", run.Attempt)
}

type harness struct {
	e     *trigger.Engine
	clk   *clocktest.Clock
	exec  *fakeExec
	stop  func() error // cancels Run and returns its result
	ctx   context.Context
	start func()
}

// newHarness makes an engine on a fake clock with the fake executor
// registered as the default; start runs its scheduler until the test
// ends.
func newHarness(t *testing.T, cfg trigger.Config) *harness {
	t.Helper()
	h := &harness{clk: clocktest.New(engineBase), exec: &fakeExec{}, ctx: context.Background()}
	cfg.Clock = h.clk
	if cfg.Executors == nil {
		cfg.Executors = map[string]trigger.Executor{trigger.DefaultExecutor: h.exec}
	}
	e, err := trigger.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	h.start = func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		var once sync.Once
		var result error
		h.stop = func() error {
			once.Do(func() { cancel(); result = <-done })
			return result
		}
		t.Cleanup(func() { _ = h.stop() })
	}
	return h
}

func scheduleTask(tenant, id string, s trigger.Schedule) *trigger.Task {
	return &trigger.Task{
		ID: id, TenantID: tenant, Name: "task " + id,
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: s},
		Action:  trigger.Action{Instruction: "do " + id},
	}
}

func (h *harness) create(t *testing.T, task *trigger.Task) *trigger.Task {
	t.Helper()
	if err := h.e.CreateTask(h.ctx, task); err != nil {
		t.Fatal(err)
	}
	return task
}

func (h *harness) get(t *testing.T, tenant, id string) *trigger.Task {
	t.Helper()
	task, err := h.e.Get(h.ctx, tenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func (h *harness) runs(t *testing.T, tenant, id string) []trigger.Run {
	t.Helper()
	runs, err := h.e.Runs(h.ctx, tenant, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// waitFor polls cond until it holds; the engine works in goroutines of
// its own, which the fake clock does not wait for.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// advanceTo waits for the scheduler to sleep on a timer, then moves the
// clock to at.
func (h *harness) advanceTo(t *testing.T, at time.Time) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.clk.AwaitTimers(ctx, 1); err != nil {
		t.Fatalf("scheduler not waiting before %s: %v", at, err)
	}
	h.clk.Advance(at.Sub(h.clk.Now()))
}

// finished reports whether the task has n runs, none running, and the
// newest with the given status.
func (h *harness) finished(t *testing.T, tenant, id string, n int, newest trigger.RunStatus) func() bool {
	return func() bool {
		runs, err := h.e.Runs(h.ctx, tenant, id, 0)
		if err != nil || len(runs) != n {
			return false
		}
		return runs[0].Status == newest && h.settled(tenant, id, runs[0])
	}
}

// settled reports whether the task reflects the outcome of run r.
func (h *harness) settled(tenant, id string, r trigger.Run) bool {
	task, err := h.e.Get(h.ctx, tenant, id)
	if err != nil {
		return false
	}
	switch r.Status {
	case trigger.RunSucceeded:
		return task.LastRun.Equal(r.StartedAt) && !task.NextRun.Equal(r.DueAt)
	case trigger.RunDead:
		return task.Status == trigger.StatusDead
	case trigger.RunFailed:
		return task.NextRun.After(r.FinishedAt)
	}
	return false
}

func at(d, h, m int) time.Time { return time.Date(2026, 6, d, h, m, 0, 0, time.UTC) }

func TestEngineCron(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	task := h.create(t, scheduleTask("t1", "daily", trigger.Schedule{Cron: "0 9 * * *"}))
	if !task.NextRun.Equal(at(1, 9, 0)) || task.Status != trigger.StatusActive {
		t.Fatalf("created: NextRun %s, Status %s", task.NextRun, task.Status)
	}
	h.start()
	for i := 1; i <= 3; i++ {
		due := at(i, 9, 0)
		h.advanceTo(t, due)
		waitFor(t, fmt.Sprintf("run %d", i), h.finished(t, "t1", "daily", i, trigger.RunSucceeded))
		r := h.runs(t, "t1", "daily")[0]
		if r.ID != trigger.RunID("daily", due) || !r.DueAt.Equal(due) || r.Attempt != 1 ||
			r.Result != "done "+r.ID || r.Consumed.Tokens != 3 {
			t.Fatalf("run %d = %+v", i, r)
		}
		got := h.get(t, "t1", "daily")
		if !got.NextRun.Equal(at(i+1, 9, 0)) || !got.LastRun.Equal(due) {
			t.Fatalf("after run %d: NextRun %s, LastRun %s", i, got.NextRun, got.LastRun)
		}
	}
	calls := h.exec.Calls()
	if len(calls) != 3 || calls[0].Task.ID != "daily" || calls[0].Task.Action.Instruction != "do daily" {
		t.Fatalf("calls = %+v", calls)
	}
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
}

func TestEngineInterval(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.create(t, scheduleTask("t1", "q", trigger.Schedule{Every: 15 * time.Minute}))
	h.start()
	for i := 1; i <= 4; i++ {
		due := engineBase.Add(time.Duration(i-1) * 15 * time.Minute)
		if i > 1 {
			h.advanceTo(t, due)
		}
		waitFor(t, fmt.Sprintf("run %d", i), h.finished(t, "t1", "q", i, trigger.RunSucceeded))
		if r := h.runs(t, "t1", "q")[0]; !r.DueAt.Equal(due) {
			t.Fatalf("run %d due at %s, want %s", i, r.DueAt, due)
		}
	}
}

func TestEngineAtCompletes(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.create(t, scheduleTask("t1", "once", trigger.Schedule{At: engineBase.Add(time.Hour)}))
	h.start()
	h.advanceTo(t, engineBase.Add(time.Hour))
	waitFor(t, "completion", func() bool {
		task, err := h.e.Get(h.ctx, "t1", "once")
		return err == nil && task.Status == trigger.StatusCompleted
	})
	task := h.get(t, "t1", "once")
	runs := h.runs(t, "t1", "once")
	if !task.NextRun.IsZero() || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded {
		t.Fatalf("task %+v, runs %+v", task, runs)
	}

	// A time in the past is refused.
	err := h.e.CreateTask(h.ctx, scheduleTask("t1", "past", trigger.Schedule{At: engineBase.Add(-time.Hour)}))
	if !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("past At: %v", err)
	}
}

func TestEngineRetriesThenDead(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(failing)
	task := scheduleTask("t1", "flaky", trigger.Schedule{Cron: "0 9 * * *"})
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Minute}
	h.create(t, task)
	h.start()

	due := at(1, 9, 0)
	h.advanceTo(t, due)
	waitFor(t, "attempt 1", h.finished(t, "t1", "flaky", 1, trigger.RunFailed))
	if got := h.get(t, "t1", "flaky"); !got.NextRun.Equal(due.Add(time.Minute)) || got.Status != trigger.StatusActive {
		t.Fatalf("after attempt 1: %s %s", got.Status, got.NextRun)
	}
	h.advanceTo(t, due.Add(time.Minute))
	waitFor(t, "attempt 2", func() bool {
		runs := h.runs(t, "t1", "flaky")
		return len(runs) == 1 && runs[0].Attempt == 2 && runs[0].Status == trigger.RunFailed && h.settled("t1", "flaky", runs[0])
	})
	if got := h.get(t, "t1", "flaky"); !got.NextRun.Equal(due.Add(3 * time.Minute)) { // backoff doubles
		t.Fatalf("after attempt 2: NextRun %s", got.NextRun)
	}
	h.advanceTo(t, due.Add(3*time.Minute))
	waitFor(t, "dead", h.finished(t, "t1", "flaky", 1, trigger.RunDead))
	r := h.runs(t, "t1", "flaky")[0]
	if r.Attempt != 3 || r.Error != "boom 3" || r.ID != trigger.RunID("flaky", due) {
		t.Fatalf("dead run = %+v", r)
	}
	for i, c := range h.exec.Calls() {
		if c.RunID != trigger.RunID("flaky", due) || c.Attempt != i+1 || !c.DueAt.Equal(due) {
			t.Fatalf("call %d = %+v", i, c)
		}
	}
	if got := h.get(t, "t1", "flaky"); got.Status != trigger.StatusDead || !got.NextRun.IsZero() {
		t.Fatalf("task %s %s", got.Status, got.NextRun)
	}

	// Retry revives it on its schedule.
	if _, err := h.e.Retry(h.ctx, "t1", "nope"); !errors.Is(err, trigger.ErrNotFound) {
		t.Fatal(err)
	}
	h.exec.setFn(nil)
	revived, err := h.e.Retry(h.ctx, "t1", "flaky")
	if err != nil {
		t.Fatal(err)
	}
	if revived.Status != trigger.StatusActive || !revived.NextRun.Equal(at(2, 9, 0)) {
		t.Fatalf("revived: %s %s", revived.Status, revived.NextRun)
	}
	if _, err := h.e.Retry(h.ctx, "t1", "flaky"); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("Retry of an ACTIVE task: %v", err)
	}
	h.advanceTo(t, at(2, 9, 0))
	waitFor(t, "run after Retry", h.finished(t, "t1", "flaky", 2, trigger.RunSucceeded))
}

func TestEngineRetryOneTime(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(failing)
	task := scheduleTask("t1", "once", trigger.Schedule{At: engineBase.Add(time.Hour)})
	task.Retry.MaxAttempts = 1
	h.create(t, task)
	h.start()
	h.advanceTo(t, engineBase.Add(time.Hour))
	waitFor(t, "dead", h.finished(t, "t1", "once", 1, trigger.RunDead))
	h.exec.setFn(nil)
	if _, err := h.e.Retry(h.ctx, "t1", "once"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "completion", func() bool {
		task, err := h.e.Get(h.ctx, "t1", "once")
		return err == nil && task.Status == trigger.StatusCompleted
	})
}

func TestEnginePauseResume(t *testing.T) {
	for _, tc := range []struct {
		policy trigger.MissedPolicy
		runs   int
	}{{trigger.CatchUpOnce, 1}, {trigger.Skip, 0}} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			h := newHarness(t, trigger.Config{})
			task := scheduleTask("t1", "daily", trigger.Schedule{Cron: "0 9 * * *"})
			task.Trigger.Missed = tc.policy
			h.create(t, task)
			h.create(t, scheduleTask("t1", "witness", trigger.Schedule{Cron: "0 9 * * *"}))
			paused, err := h.e.Pause(h.ctx, "t1", "daily")
			if err != nil || paused.Status != trigger.StatusPaused {
				t.Fatalf("Pause = %v, %v", paused, err)
			}
			h.start()
			for d := 1; d <= 3; d++ {
				h.advanceTo(t, at(d, 9, 0))
				waitFor(t, "witness", h.finished(t, "t1", "witness", d, trigger.RunSucceeded))
			}
			if n := len(h.runs(t, "t1", "daily")); n != 0 {
				t.Fatalf("paused task ran %d times", n)
			}
			h.clk.Advance(at(4, 8, 0).Sub(h.clk.Now()))
			resumed, err := h.e.Resume(h.ctx, "t1", "daily")
			if err != nil || resumed.Status != trigger.StatusActive {
				t.Fatalf("Resume = %v, %v", resumed, err)
			}
			if tc.runs == 1 {
				waitFor(t, "catch-up run", h.finished(t, "t1", "daily", 1, trigger.RunSucceeded))
				if r := h.runs(t, "t1", "daily")[0]; !r.DueAt.Equal(at(1, 9, 0)) {
					t.Fatalf("catch-up run due at %s", r.DueAt)
				}
			}
			// The scheduler now sleeps until 4 June 09:00.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := h.clk.AwaitTimers(ctx, 1); err != nil {
				t.Fatal(err)
			}
			if n := len(h.runs(t, "t1", "daily")); n != tc.runs {
				t.Fatalf("%d runs after Resume, want %d", n, tc.runs)
			}
			if got := h.get(t, "t1", "daily"); !got.NextRun.Equal(at(4, 9, 0)) {
				t.Fatalf("NextRun after Resume %s", got.NextRun)
			}
		})
	}
}

func TestEngineRunNow(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.create(t, scheduleTask("t1", "daily", trigger.Schedule{Cron: "0 9 * * *"}))
	r, err := h.e.RunNow(h.ctx, "t1", "daily")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != trigger.RunSucceeded || !r.DueAt.Equal(engineBase) || r.ID == trigger.RunID("daily", engineBase) {
		t.Fatalf("RunNow = %+v", r)
	}
	got := h.get(t, "t1", "daily")
	if !got.LastRun.Equal(engineBase) || !got.NextRun.Equal(at(1, 9, 0)) {
		t.Fatalf("after RunNow: LastRun %s NextRun %s", got.LastRun, got.NextRun)
	}
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		panic("kaboom")
	})
	h.clk.Advance(time.Minute)
	r, err = h.e.RunNow(h.ctx, "t1", "daily")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != trigger.RunDead || !strings.Contains(r.Error, "kaboom") {
		t.Fatalf("failed RunNow = %+v", r)
	}
	if runs := h.runs(t, "t1", "daily"); len(runs) != 2 || runs[0].ID != r.ID {
		t.Fatalf("history %+v", runs)
	}
	if got := h.get(t, "t1", "daily"); got.Status != trigger.StatusActive {
		t.Fatalf("status %s after a failed RunNow", got.Status)
	}
	// The failed manual run is not a retry of the schedule.
	h.exec.setFn(nil)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "scheduled run", h.finished(t, "t1", "daily", 3, trigger.RunSucceeded))
	if r := h.runs(t, "t1", "daily")[0]; r.ID != trigger.RunID("daily", at(1, 9, 0)) || r.Attempt != 1 {
		t.Fatalf("scheduled run %+v", r)
	}
}

func TestEnginePanic(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		var m map[string]int
		m["x"]++ // a runtime panic
		return trigger.ExecResult{}, nil
	})
	task := scheduleTask("t1", "p", trigger.Schedule{Every: time.Hour})
	task.Retry.MaxAttempts = 2
	h.create(t, task)
	h.start()
	waitFor(t, "failed run", h.finished(t, "t1", "p", 1, trigger.RunFailed))
	if r := h.runs(t, "t1", "p")[0]; !strings.Contains(r.Error, "panicked") {
		t.Fatalf("run %+v", r)
	}
}

func TestEngineTimeout(t *testing.T) {
	h := newHarness(t, trigger.Config{RunTimeout: 5 * time.Millisecond})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		<-ctx.Done()
		return trigger.ExecResult{}, ctx.Err()
	})
	h.create(t, scheduleTask("t1", "slow", trigger.Schedule{Every: time.Hour}))
	r, err := h.e.RunNow(h.ctx, "t1", "slow")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Error, context.DeadlineExceeded.Error()) {
		t.Fatalf("run %+v", r)
	}
}

// A task's MaxWall, which its executor holds to, bounds the run with
// WallGrace on top, whatever the engine's RunTimeout.
func TestEngineTimeoutMaxWall(t *testing.T) {
	h := newHarness(t, trigger.Config{RunTimeout: 5 * time.Millisecond})
	var left time.Duration
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		d, ok := ctx.Deadline()
		if !ok {
			return trigger.ExecResult{}, errors.New("no deadline")
		}
		left = time.Until(d)
		return trigger.ExecResult{}, nil
	})
	task := scheduleTask("t1", "walled", trigger.Schedule{Every: time.Hour})
	task.Budget.MaxWall = 2 * time.Second
	h.create(t, task)
	if r, err := h.e.RunNow(h.ctx, "t1", "walled"); err != nil || r.Status != trigger.RunSucceeded {
		t.Fatal(r, err)
	}
	if want := 2*time.Second + trigger.WallGrace; left > want || left < want-time.Second {
		t.Errorf("the run had %s, want about %s", left, want)
	}
}

func TestEngineTenantIsolation(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	task := scheduleTask("t1", "a", trigger.Schedule{Cron: "0 9 * * *"})
	h.create(t, task)
	ctx := h.ctx
	for name, call := range map[string]func() error{
		"Get":    func() error { _, err := h.e.Get(ctx, "t2", "a"); return err },
		"Pause":  func() error { _, err := h.e.Pause(ctx, "t2", "a"); return err },
		"Resume": func() error { _, err := h.e.Resume(ctx, "t2", "a"); return err },
		"Retry":  func() error { _, err := h.e.Retry(ctx, "t2", "a"); return err },
		"RunNow": func() error { _, err := h.e.RunNow(ctx, "t2", "a"); return err },
		"Runs":   func() error { _, err := h.e.Runs(ctx, "t2", "a", 0); return err },
		"Delete": func() error { return h.e.Delete(ctx, "t2", "a") },
	} {
		if err := call(); !errors.Is(err, trigger.ErrNotFound) {
			t.Errorf("%s of another tenant's task = %v, want ErrNotFound", name, err)
		}
	}
	if l, err := h.e.List(ctx, "t2"); err != nil || len(l) != 0 {
		t.Errorf("List of t2 = %v, %v", l, err)
	}
	if l, err := h.e.List(ctx, "t1", trigger.StatusActive); err != nil || len(l) != 1 {
		t.Errorf("List of t1 = %v, %v", l, err)
	}
	// The same id in another tenant is another task.
	h.create(t, scheduleTask("t2", "a", trigger.Schedule{Cron: "0 10 * * *"}))
	if err := h.e.Delete(ctx, "t2", "a"); err != nil {
		t.Fatal(err)
	}
	if got := h.get(t, "t1", "a"); got.Trigger.Schedule.Cron != "0 9 * * *" {
		t.Fatalf("t1's task changed: %+v", got)
	}
	if l, err := h.e.List(ctx, "t1"); err != nil || len(l) != 1 {
		t.Fatalf("List = %v, %v", l, err)
	}
}

func TestEngineCreateRefuses(t *testing.T) {
	h := newHarness(t, trigger.Config{Executors: map[string]trigger.Executor{"custom": &fakeExec{}}})
	for name, tc := range map[string]struct {
		task *trigger.Task
		want error
	}{
		"nil":             {nil, trigger.ErrInvalid},
		"default missing": {scheduleTask("t1", "a", trigger.Schedule{Every: time.Hour}), trigger.ErrInvalid},
		"unknown executor": {func() *trigger.Task {
			x := scheduleTask("t1", "a", trigger.Schedule{Every: time.Hour})
			x.Executor = "nope"
			return x
		}(), trigger.ErrInvalid},
		"unknown condition": {&trigger.Task{ID: "c", TenantID: "t1", Name: "c", Executor: "custom", Trigger: trigger.Trigger{Kind: trigger.KindCondition, Condition: "x", Every: time.Minute}}, trigger.ErrInvalid},
		"bad schedule": {func() *trigger.Task {
			x := scheduleTask("t1", "a", trigger.Schedule{Cron: "nope"})
			x.Executor = "custom"
			return x
		}(), trigger.ErrInvalid},
		"dead status": {func() *trigger.Task {
			x := scheduleTask("t1", "a", trigger.Schedule{Every: time.Hour})
			x.Executor = "custom"
			x.Status = trigger.StatusDead
			return x
		}(), trigger.ErrInvalid},
	} {
		if err := h.e.CreateTask(h.ctx, tc.task); !errors.Is(err, tc.want) {
			t.Errorf("%s: CreateTask = %v, want %v", name, err, tc.want)
		}
	}
	ok := scheduleTask("t1", "a", trigger.Schedule{Every: time.Hour})
	ok.Executor = "custom"
	h.create(t, ok)
	if err := h.e.CreateTask(h.ctx, ok); !errors.Is(err, trigger.ErrConflict) {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{"x": nil}}); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("nil executor: %v", err)
	}
	if _, err := trigger.New(trigger.Config{MaxConcurrent: -1}); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("negative MaxConcurrent: %v", err)
	}
}

func TestEngineMaxConcurrent(t *testing.T) {
	h := newHarness(t, trigger.Config{MaxConcurrent: 2})
	var inFlight, peak atomic.Int32
	release := make(chan struct{})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		select {
		case <-release:
		case <-ctx.Done():
			return trigger.ExecResult{}, ctx.Err()
		}
		return trigger.ExecResult{Result: "ok"}, nil
	})
	for i := range 5 {
		h.create(t, scheduleTask("t1", fmt.Sprint("task", i), trigger.Schedule{Cron: "0 9 * * *"}))
	}
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "two in flight", func() bool { return inFlight.Load() == 2 })
	time.Sleep(20 * time.Millisecond) // give a third the chance to start wrongly
	if n := len(h.exec.Calls()); n != 2 {
		t.Fatalf("%d executions started, limit 2", n)
	}
	close(release)
	for i := range 5 {
		waitFor(t, "all runs", h.finished(t, "t1", fmt.Sprint("task", i), 1, trigger.RunSucceeded))
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("peak concurrency %d, want 2", p)
	}
}

func TestEngineStopsCleanly(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	h := newHarness(t, trigger.Config{})
	started := make(chan struct{})
	var sawCancel atomic.Bool
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		close(started)
		<-ctx.Done()
		sawCancel.Store(true)
		return trigger.ExecResult{}, ctx.Err()
	})
	h.create(t, scheduleTask("t1", "a", trigger.Schedule{Every: time.Hour}))
	h.create(t, scheduleTask("t1", "b", trigger.Schedule{Cron: "0 9 * * *"}))
	h.start()
	<-started
	if err := h.stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if !sawCancel.Load() {
		t.Fatal("the executor's ctx was not cancelled")
	}
	runs := h.runs(t, "t1", "a")
	if len(runs) != 1 || runs[0].Status != trigger.RunFailed || !strings.Contains(runs[0].Error, "interrupted") {
		t.Fatalf("interrupted run %+v", runs)
	}
	// The interrupted run is retried, with the same id, on the next start.
	h.exec.setFn(nil)
	h.start()
	waitFor(t, "retry", h.finished(t, "t1", "a", 1, trigger.RunSucceeded))
	if r := h.runs(t, "t1", "a")[0]; r.Attempt != 2 || r.ID != trigger.RunID("a", engineBase) {
		t.Fatalf("retried run %+v", r)
	}
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestEngineMissedWhileStopped(t *testing.T) {
	for _, tc := range []struct {
		policy trigger.MissedPolicy
		runs   int
	}{{trigger.CatchUpOnce, 1}, {trigger.Skip, 0}} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			h := newHarness(t, trigger.Config{})
			task := scheduleTask("t1", "daily", trigger.Schedule{Cron: "0 9 * * *"})
			task.Trigger.Missed = tc.policy
			h.create(t, task)
			h.clk.Advance(at(4, 8, 0).Sub(engineBase)) // nothing running for three days
			h.start()
			waitFor(t, "the scheduler to settle", func() bool {
				got, err := h.e.Get(h.ctx, "t1", "daily")
				return err == nil && got.NextRun.Equal(at(4, 9, 0)) && h.clk.Timers() == 1
			})
			runs := h.runs(t, "t1", "daily")
			if len(runs) != tc.runs {
				t.Fatalf("%d runs, want %d", len(runs), tc.runs)
			}
			if tc.runs == 1 && !runs[0].DueAt.Equal(at(1, 9, 0)) {
				t.Fatalf("catch-up run due at %s", runs[0].DueAt)
			}
		})
	}
}
