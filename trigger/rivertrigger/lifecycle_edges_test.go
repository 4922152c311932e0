package rivertrigger_test

// Review of 5c901d9 (trigger/rivertrigger): each test here fails because
// of a defect and passes once it is fixed. They need VALET_TEST_POSTGRES.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// dueNow returns a one-time task that was due a second ago, ACTIVE, with
// NextRun set: created through the Store, its job is available at once.
func dueNow(tenant, id string) *trigger.Task {
	at := time.Now().Add(-time.Second)
	task := oneTime(tenant, id, at)
	task.NextRun = at
	return task
}

// liveJobs counts the task's jobs River will still work.
func liveJobs(st map[string]int) int {
	return st["available"] + st["scheduled"] + st["running"] + st["retryable"] + st["pending"]
}

// A run that succeeds while its task was paused (Pause on any replica
// during the run) is recorded alone: finishTask keeps the PAUSED task's
// NextRun at the due time that just ran. Resume then puts NextRun back on
// that same due time, whose job is completed: River's unique key
// (completed is a unique state) drops the insert, so the task stays
// ACTIVE, due, with no job, forever. (Were the key free, the run that
// already succeeded would run again.)
func TestPauseDuringSuccessfulRunStrandsTask(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	var calls atomic.Int32
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		calls.Add(1)
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return trigger.ExecResult{}, ctx.Err()
		}
		return trigger.ExecResult{Result: "mail sent"}, nil
	}))
	ctx := context.Background()
	if err := s.Create(ctx, dueNow("dora", "mail")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not start")
	}
	if _, err := e.Pause(ctx, "dora", "mail"); err != nil {
		t.Fatal(err)
	}
	close(release)
	waitFor(t, 10*time.Second, "the run's job completed", func() (bool, error) {
		return jobStates(t, pool, "mail")["completed"] == 1, nil
	})
	if _, err := e.Resume(ctx, "dora", "mail"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		task, err := e.Get(ctx, "dora", "mail")
		if err != nil {
			t.Fatal(err)
		}
		done := task.Status == trigger.StatusCompleted || task.Status == trigger.StatusExpired
		if done && calls.Load() == 1 {
			return
		}
		if time.Now().After(deadline) || calls.Load() > 1 {
			t.Fatalf("after a run that succeeded while paused, then Resume: task %s, NextRun %s, LastRun %s, "+
				"jobs %v, %d executions; want the task finished (COMPLETED or EXPIRED) after 1 execution",
				task.Status, task.NextRun.Format(time.RFC3339Nano), task.LastRun.Format(time.RFC3339Nano),
				jobStates(t, pool, "mail"), calls.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// resumeOnStale is another replica resuming the task between HandleDue
// finding the run stale and River cancelling its job.
type resumeOnStale struct {
	e    *trigger.Engine
	once sync.Once
	err  error
}

func (h *resumeOnStale) HandleDue(ctx context.Context, d trigger.Due) error {
	err := h.e.HandleDue(ctx, d)
	if errors.Is(err, trigger.ErrStale) {
		h.once.Do(func() { _, h.err = h.e.Resume(context.Background(), d.TenantID, d.TaskID) })
	}
	return err
}

func (h *resumeOnStale) HandleLost(ctx context.Context, d trigger.Due, reason string) error {
	return h.e.HandleLost(ctx, d, reason)
}

// The stale check (HandleDue reads the task) and the job's cancellation
// (River, after Work returns) are not atomic with the task's row. A Resume
// committed in between re-queues the same due time, but the job is still
// running, so River's unique key drops the insert; then the job is
// cancelled. The task is ACTIVE, due, with no job: it never runs.
func TestResumeRacingStaleCancelLosesRun(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	var calls atomic.Int32
	e, err := trigger.New(trigger.Config{Store: s, Executors: map[string]trigger.Executor{
		trigger.DefaultExecutor: trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
			calls.Add(1)
			return trigger.ExecResult{Result: "ok"}, nil
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Create(ctx, dueNow("erin", "report")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pause(ctx, "erin", "report"); err != nil {
		t.Fatal(err)
	}
	h := &resumeOnStale{e: e}
	dctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Dispatch(dctx, h) }()
	defer func() { stop(); <-done }()

	deadline := time.Now().Add(6 * time.Second)
	for calls.Load() == 0 {
		if time.Now().After(deadline) {
			task, _ := e.Get(ctx, "erin", "report")
			t.Fatalf("resumed while its stale job was being cancelled (Resume err %v): task %s, NextRun %s, jobs %v, "+
				"never executed; want it to run once", h.err, task.Status, task.NextRun.Format(time.RFC3339Nano),
				jobStates(t, pool, "report"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Work snoozes an ErrConflict (a run of the task under way in this
// process, e.g. RunNow) only while job.Attempt < MaxAttempts; on the last
// attempt it returns the error and River discards the job although the
// run never failed. River's snooze does not use up an attempt, so the
// guard is not needed. The discarded job is a dead letter, and the
// reconciler makes the task DEAD unless a later write re-queues it first.
func TestConflictOnLastAttemptDiscardsJob(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	release := make(chan struct{})
	nowStarted := make(chan struct{})
	var scheduled atomic.Int32
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if strings.HasSuffix(run.RunID, "#now") {
			close(nowStarted)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return trigger.ExecResult{Result: "by hand"}, nil
		}
		scheduled.Add(1)
		return trigger.ExecResult{Result: "scheduled"}, nil
	}))
	ctx := context.Background()
	task := dueNow("fay", "digest")
	task.Status = trigger.StatusPaused // no job yet
	task.Retry.MaxAttempts = 1
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	nowDone := make(chan error, 1)
	go func() { _, err := e.RunNow(ctx, "fay", "digest"); nowDone <- err }()
	<-nowStarted
	cur, err := s.Get(ctx, "fay", "digest")
	if err != nil {
		t.Fatal(err)
	}
	cur.Status = trigger.StatusActive // its job is queued, available at once
	if err := s.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// The job comes up while RunNow holds the task.
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && jobStates(t, pool, "digest")["discarded"] == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	close(release)
	if err := <-nowDone; err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the task COMPLETED", statusIs(e, "fay", "digest", trigger.StatusCompleted))
	if st := jobStates(t, pool, "digest"); st["discarded"] != 0 {
		t.Fatalf("jobs %v: the run's only attempt met a RunNow under way and was discarded, "+
			"though nothing failed; want it snoozed", st)
	}
}

// River cancels a job's context at JobTimeout; Work takes any ended ctx
// for the process stopping and snoozes, which hands the attempt back
// (River decrements attempt on snooze). A run that outlasts JobTimeout
// (the engine's RunTimeout above it, or the run waiting for an engine
// slot) is thus executed again and again as attempt 1: never DEAD, never
// rescued, an endless loop of executions.
func TestJobTimeoutSnoozesForever(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{
		FetchPollInterval:    100 * time.Millisecond,
		JobTimeout:           time.Second,
		RescueStuckJobsAfter: 3 * time.Second,
	})
	var mu sync.Mutex
	var attempts []int
	engineOn(t, s, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		attempts = append(attempts, run.Attempt)
		mu.Unlock()
		<-ctx.Done() // a run longer than JobTimeout
		return trigger.ExecResult{}, ctx.Err()
	}))
	ctx := context.Background()
	task := dueNow("gus", "slow")
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: 100 * time.Millisecond}
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	// River's leader makes a retryable job available every 5 s: allow
	// for two of those.
	deadline := time.Now().Add(15 * time.Second)
	for {
		mu.Lock()
		got := append([]int(nil), attempts...)
		mu.Unlock()
		for _, a := range got {
			if a >= 2 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a run timed out by JobTimeout (1s) was executed %d times, attempts %v, jobs %v: "+
				"snoozed each time, never counted; want attempt 2 after the first timeout",
				len(got), got, jobStates(t, pool, "slow"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// discard marks the task's job discarded, finalized at PostgreSQL's
// now() plus offset, as River does with a worker's clock.
func discard(t *testing.T, pool *pgxpool.Pool, taskID, offset string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), `UPDATE river_job SET state = 'discarded',
		finalized_at = now() + $2::interval,
		errors = ARRAY['{"error": "worker died", "attempt": 1, "at": "2026-01-01T00:00:00Z"}'::jsonb]
		WHERE kind = $1 AND args->>'task_id' = $3`, rivertrigger.JobKind, offset, taskID); err != nil {
		t.Fatal(err)
	}
}

// The reconciler's watermark is the newest finalized_at it has handled,
// but River writes finalized_at from a client's Go clock (the rescuer's
// time.Now, the executor's e.Time.Now, before the completer's batch
// commits), not PostgreSQL's. A job discarded by a replica whose clock is
// a little behind, or committed after a later one, lands below the
// watermark and is never reconciled: its task stays ACTIVE with no job.
func TestReconcilerWatermarkMissesEarlierFinalizedAt(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{ReconcileInterval: 200 * time.Millisecond})
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{}, nil
	}))
	ctx := context.Background()
	for _, id := range []string{"first", "second"} {
		if err := e.CreateTask(ctx, oneTime("hal", id, time.Now().Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	discard(t, pool, "first", "0")
	waitFor(t, 10*time.Second, "the first task DEAD", statusIs(e, "hal", "first", trigger.StatusDead))
	time.Sleep(500 * time.Millisecond)       // a pass or two after it
	discard(t, pool, "second", "-2 seconds") // a replica whose clock is 2 s behind
	deadline := time.Now().Add(3 * time.Second)
	for {
		task, err := e.Get(ctx, "hal", "second")
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == trigger.StatusDead {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a job discarded with finalized_at 2 s before the reconciler's watermark: task %s, jobs %v; "+
				"want DEAD", task.Status, jobStates(t, pool, "second"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// reconcileOnce stops at the first HandleLost error and starts from it
// again next time, so one job whose HandleLost always fails stops the
// reconciliation of every later discarded job for good. Here the first
// job's task has a MaxWall that the store's JobTimeout (lowered by the
// operator) refuses, so its Finish is ErrInvalid on every pass.
func TestReconcilerStuckBehindPoisonJob(t *testing.T) {
	schema := newSchema(t)
	ctx := context.Background()
	old, err := rivertrigger.New(poolIn(t, schema), rivertrigger.Config{JobTimeout: 2 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	poison := oneTime("ivy", "long", time.Now().Add(time.Hour))
	poison.NextRun = poison.Trigger.Schedule.At
	poison.Budget.MaxWall = time.Hour
	if err := old.Create(ctx, poison); err != nil {
		t.Fatal(err)
	}
	pool := poolIn(t, schema)
	s, err := rivertrigger.New(pool, rivertrigger.Config{ReconcileInterval: 200 * time.Millisecond}) // JobTimeout 15 min
	if err != nil {
		t.Fatal(err)
	}
	e, _ := engineOn(t, s, trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{}, nil
	}))
	if err := e.CreateTask(ctx, oneTime("ivy", "short", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	discard(t, pool, "long", "-1 second")
	discard(t, pool, "short", "0")
	deadline := time.Now().Add(3 * time.Second)
	for {
		task, err := e.Get(ctx, "ivy", "short")
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == trigger.StatusDead {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a discarded job after one whose HandleLost fails: task %s, jobs %v; want DEAD",
				task.Status, jobStates(t, pool, "short"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Migrate holds a pooled connection for the advisory lock while River's
// migrator takes other connections from the same pool: with a pool of one
// connection it waits for itself until ctx ends.
func TestMigrateWithOneConnection(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(postgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = newSchema(t)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := rivertrigger.New(pool, rivertrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate on a pool of one connection: %v", err)
	}
}
