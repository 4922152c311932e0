package sqlitetrigger_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// engineOn starts an engine on s with exec as the default executor; the
// returned function stops it and returns Run's result.
func engineOn(t *testing.T, s *sqlitetrigger.Store, exec trigger.Executor) (*trigger.Engine, func() error) {
	t.Helper()
	e, err := trigger.New(trigger.Config{
		Store:         s,
		Executors:     map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		MaxConcurrent: 16,
		RunTimeout:    20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, runEngine(t, e)
}

// runEngine runs e until the returned function is called (or t ends).
func runEngine(t *testing.T, e *trigger.Engine) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func oneTime(tenant, id string, at time.Time) *trigger.Task {
	return &trigger.Task{
		ID: id, TenantID: tenant, Name: "task " + id, Status: trigger.StatusActive,
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: at}},
		Action:  trigger.Action{Instruction: "do " + id},
	}
}

// waitFor polls cond every 50 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func statusIs(e *trigger.Engine, tenant, id string, want trigger.Status) func() (bool, error) {
	return func() (bool, error) {
		task, err := e.Get(context.Background(), tenant, id)
		if err != nil {
			return false, err
		}
		return task.Status == want, nil
	}
}

// jobStates counts the run jobs of a task by state.
func jobStates(t *testing.T, db *sql.DB, taskID string) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT state, count(*) FROM river_job WHERE kind = ? AND args->>'task_id' = ? GROUP BY state`,
		sqlitetrigger.JobKind, taskID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fast is a configuration that fetches often, for tests on the real clock.
func fast() sqlitetrigger.Config {
	return sqlitetrigger.Config{FetchPollInterval: 100 * time.Millisecond}
}

func TestEngineRunsOnRiver(t *testing.T) {
	s, db := newStore(t, fast())
	var calls atomic.Int32
	e, stop := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		calls.Add(1)
		return trigger.ExecResult{Result: "done " + run.Task.ID, Usage: trigger.Usage{Tokens: 7}}, nil
	}))
	ctx := context.Background()
	task := oneTime("alice", "remind", time.Now().Add(300*time.Millisecond))
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the one-time task completed", statusIs(e, "alice", "remind", trigger.StatusCompleted))
	runs, err := e.Runs(ctx, "alice", "remind", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "done remind" ||
		runs[0].Consumed.Tokens != 7 || runs[0].Attempt != 1 {
		t.Fatalf("runs = %+v", runs)
	}
	if want := trigger.RunID("remind", task.NextRun); runs[0].ID != want {
		t.Errorf("run id %q, want %q", runs[0].ID, want)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
	// The job was completed in the transaction that recorded the run.
	if st := jobStates(t, db, "remind"); st["completed"] != 1 || len(st) != 1 {
		t.Errorf("jobs of the task: %v, want one completed", st)
	}
	if err := stop(); err != nil {
		t.Errorf("Run returned %v", err)
	}
}

func TestEngineRetriesThenDeadThenRetry(t *testing.T) {
	s, db := newStore(t, fast())
	var fail atomic.Bool
	fail.Store(true)
	var attempts sync.Map
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		attempts.Store(run.Attempt, run.RunID)
		if fail.Load() {
			return trigger.ExecResult{}, fmt.Errorf("mailbox unreachable (attempt %d)", run.Attempt)
		}
		return trigger.ExecResult{Result: "ok"}, nil
	}))
	ctx := context.Background()
	task := oneTime("alice", "flaky", time.Now().Add(200*time.Millisecond))
	task.Retry = trigger.Retry{MaxAttempts: 2, Backoff: time.Second}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the task DEAD", statusIs(e, "alice", "flaky", trigger.StatusDead))
	runs, err := e.Runs(ctx, "alice", "flaky", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunDead || runs[0].Attempt != 2 ||
		!strings.Contains(runs[0].Error, "mailbox unreachable (attempt 2)") {
		t.Fatalf("runs = %+v", runs)
	}
	a1, _ := attempts.Load(1)
	a2, _ := attempts.Load(2)
	if a1 == nil || a1 != a2 {
		t.Errorf("attempts ran as %v and %v, want one run id", a1, a2)
	}
	waitFor(t, 10*time.Second, "the job discarded", func() (bool, error) {
		return jobStates(t, db, "flaky")["discarded"] == 1, nil
	})
	fail.Store(false)
	if _, err := e.Retry(ctx, "alice", "flaky"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the revived task completed", statusIs(e, "alice", "flaky", trigger.StatusCompleted))
	runs, _ = e.Runs(ctx, "alice", "flaky", 0)
	if runs[0].Status != trigger.RunSucceeded {
		t.Errorf("newest run after Retry: %+v", runs[0])
	}
}

func TestPauseCancelsTheJobAndResumeQueuesAgain(t *testing.T) {
	s, db := newStore(t, fast())
	var calls atomic.Int32
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		calls.Add(1)
		return trigger.ExecResult{}, nil
	}))
	ctx := context.Background()
	task := oneTime("bob", "later", time.Now().Add(time.Second))
	task.Trigger.Missed = trigger.CatchUpOnce
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pause(ctx, "bob", "later"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the paused task's job cancelled", func() (bool, error) {
		return jobStates(t, db, "later")["cancelled"] == 1, nil
	})
	if n := calls.Load(); n != 0 {
		t.Fatalf("a paused task ran %d times", n)
	}
	if _, err := e.Resume(ctx, "bob", "later"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the resumed task completed", statusIs(e, "bob", "later", trigger.StatusCompleted))
	if n := calls.Load(); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}

func TestReconcilerMakesADiscardedRunDead(t *testing.T) {
	s, db := newStore(t, sqlitetrigger.Config{ReconcileInterval: 200 * time.Millisecond})
	ctx := context.Background()
	task := oneTime("carol", "lost", time.Now().Add(time.Hour))
	var calls atomic.Int32
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		calls.Add(1)
		return trigger.ExecResult{}, nil
	}))
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	// The job is discarded behind valet's back, as River's rescuer does
	// with a job whose worker died on its last attempt.
	if _, err := db.Exec(`UPDATE river_job SET state = 'discarded', finalized_at = datetime('now', 'subsec'),
		errors = jsonb('[{"error": "worker died", "attempt": 3, "at": "2026-01-01T00:00:00Z"}]')
		WHERE kind = ? AND args->>'task_id' = 'lost'`, sqlitetrigger.JobKind); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the task DEAD", statusIs(e, "carol", "lost", trigger.StatusDead))
	runs, err := e.Runs(ctx, "carol", "lost", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunDead || !strings.Contains(runs[0].Error, "worker died") {
		t.Fatalf("runs = %+v", runs)
	}
	if calls.Load() != 0 {
		t.Error("the executor ran")
	}
}

func TestEventsOnRiver(t *testing.T) {
	s, db := newStore(t, fast())
	var calls atomic.Int32
	var got atomic.Pointer[trigger.ExecRun]
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		calls.Add(1)
		got.Store(&run)
		return trigger.ExecResult{Result: "seen"}, nil
	}))
	ctx := context.Background()
	task := &trigger.Task{ID: "amazon", TenantID: "alice", Name: "amazon mail",
		Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail", Filter: map[string]string{"from.domain": "amazon.com"}},
		Action:  trigger.Action{Instruction: "summarise it"}}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	ev := trigger.Event{ID: "msg-1", TenantID: "alice", Source: "gmail", Type: "message.received",
		Data: map[string]any{"from": map[string]any{"domain": "amazon.com"}, "n": 3}}
	for range 3 { // a redelivered event is queued once
		if err := e.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "the event's run", func() (bool, error) {
		runs, err := e.Runs(ctx, "alice", "amazon", 0)
		return len(runs) == 1 && runs[0].Status == trigger.RunSucceeded, err
	})
	runs, _ := e.Runs(ctx, "alice", "amazon", 0)
	if runs[0].ID != trigger.EventRunID("amazon", "msg-1") || runs[0].Result != "seen" {
		t.Fatalf("run = %+v", runs[0])
	}
	if r := got.Load(); r == nil || r.Event == nil || r.Event.ID != "msg-1" || r.Event.Data["n"] != 3.0 {
		t.Fatalf("executor saw %+v", r)
	}
	// River completes an event run's job after its worker returns.
	waitFor(t, 10*time.Second, "one job, completed, for three deliveries", func() (bool, error) {
		st := jobStates(t, db, "amazon")
		if n := st["completed"] + st["running"]; n != 1 || len(st) != 1 {
			return false, fmt.Errorf("jobs: %v", st)
		}
		return st["completed"] == 1, nil
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}

// A chained run and the notice of its end both go through River: the
// chained run's job queued by Finish, the notice's by the chained run's
// Finish (the outbox).
func TestChainAndNotifyOnRiver(t *testing.T) {
	s, db := newStore(t, fast())
	var mu sync.Mutex
	var notes []trigger.Notification
	var prevs []*trigger.Previous
	e, err := trigger.New(trigger.Config{
		Store: s,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(_ context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
				mu.Lock()
				prevs = append(prevs, run.Previous)
				mu.Unlock()
				return trigger.ExecResult{Result: "output of " + run.Task.ID}, nil
			})},
		Notifiers: map[string]trigger.Notifier{"chat": trigger.NotifierFunc(func(_ context.Context, n trigger.Notification) error {
			mu.Lock()
			notes = append(notes, n)
			mu.Unlock()
			return nil
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	ctx := context.Background()
	fetch := oneTime("alice", "fetch", time.Now().Add(200*time.Millisecond))
	fetch.Route = trigger.Route{Kind: trigger.RouteChain, Next: "summarise", PassOutput: true}
	summarise := oneTime("alice", "summarise", time.Now().Add(24*time.Hour))
	summarise.Output = trigger.Output{Channel: "chat", Target: "alice@example.com"}
	for _, task := range []*trigger.Task{summarise, fetch} {
		if err := e.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "the chained run's notification", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(notes) == 1, nil
	})
	mu.Lock()
	defer mu.Unlock()
	if n := notes[0]; n.TaskID != "summarise" || n.Text != "output of summarise" || n.Target != "alice@example.com" {
		t.Fatalf("notification %+v", n)
	}
	if len(prevs) != 2 || prevs[1] == nil || prevs[1].Output != "output of fetch" {
		t.Fatalf("runs saw previous %+v", prevs)
	}
	var notices int
	if err := db.QueryRow(`SELECT count(*) FROM river_job WHERE kind = ?`, sqlitetrigger.NotifyJobKind).Scan(&notices); err != nil {
		t.Fatal(err)
	}
	if notices != 1 {
		t.Errorf("%d notice jobs, want 1", notices)
	}
}

// An engine stopped mid-run leaves the run to the next start: River
// snoozes it, and it runs again without using an attempt.
func TestStopMidRunResumesAtNextStart(t *testing.T) {
	s, _ := newStore(t, fast())
	started := make(chan struct{}, 1)
	var attempts []int
	var mu sync.Mutex
	blocking := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		attempts = append(attempts, run.Attempt)
		mu.Unlock()
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return trigger.ExecResult{}, ctx.Err()
	})
	e, stop := engineOn(t, s, blocking)
	ctx := context.Background()
	task := oneTime("pat", "long", time.Now().Add(200*time.Millisecond))
	task.Retry.MaxAttempts = 1 // a counted attempt would make it DEAD
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not start")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e2, _ := engineOn(t, s, trigger.ExecutorFunc(func(_ context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		attempts = append(attempts, run.Attempt)
		mu.Unlock()
		return trigger.ExecResult{Result: "done"}, nil
	}))
	waitFor(t, 20*time.Second, "the run done after the restart", statusIs(e2, "pat", "long", trigger.StatusCompleted))
	mu.Lock()
	defer mu.Unlock()
	if len(attempts) != 2 || attempts[0] != 1 || attempts[1] != 1 {
		t.Fatalf("attempts %v, want [1 1]", attempts)
	}
}
