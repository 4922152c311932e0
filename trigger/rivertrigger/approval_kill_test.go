package rivertrigger_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// approvalChild selects, with childSchema, the child replica of
// TestApprovalsOfAKilledReplica (TestApprovalKillChild).
const approvalChild = "RIVERTRIGGER_TEST_APPROVAL_CHILD"

// draftingExec records each execution in rt_exec and ends the run waiting
// for the user's approval of an email, expiring the task's
// Action.Instruction (a duration) after the run's due time.
func draftingExec(pool *pgxpool.Pool) trigger.Executor {
	pid := os.Getpid()
	return trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		ttl, err := time.ParseDuration(run.Task.Action.Instruction)
		if err != nil {
			return trigger.ExecResult{}, err
		}
		if _, err := pool.Exec(ctx, `INSERT INTO rt_exec (run_id, pid, attempt) VALUES ($1, $2, $3)`,
			run.RunID, pid, run.Attempt); err != nil {
			return trigger.ExecResult{}, err
		}
		return trigger.ExecResult{Result: "I drafted the email; shall I send it?",
			Approvals: []trigger.Approval{{ID: "ap-" + run.Task.ID, Summary: "Send the email to the team",
				ExpiresAt: run.DueAt.Add(ttl)}}}, nil
	})
}

// killedAfterWaiting is the child's Store: the process kills itself
// (SIGKILL) the moment the record of a run waiting for approval commits
// while want runs wait, before anything that follows the record.
type killedAfterWaiting struct {
	*rivertrigger.Store
	pool *pgxpool.Pool
	want int
}

func (k killedAfterWaiting) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	err := k.Store.Finish(ctx, r, t)
	if err != nil || r.Status != trigger.RunWaiting {
		return err
	}
	var n int
	if err := k.pool.QueryRow(ctx, `SELECT count(*) FROM valet_trigger_runs WHERE run->>'status' = 'waiting'`).Scan(&n); err != nil {
		return err
	}
	if n >= k.want {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // dies here
	}
	return nil
}

// TestApprovalKillChild is the replica TestApprovalsOfAKilledReplica
// starts in a child process; it does nothing otherwise. Its channel
// never delivers (it holds each notice until the process dies, noting
// the attempt in rt_note): what reaches the user is delivered by the
// replicas that outlive it.
func TestApprovalKillChild(t *testing.T) {
	schema := os.Getenv(childSchema)
	if schema == "" || os.Getenv(approvalChild) == "" {
		t.Skip("the child replica of TestApprovalsOfAKilledReplica")
	}
	pool := poolIn(t, schema)
	s, err := rivertrigger.New(pool, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	chat := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
		_, _ = pool.Exec(ctx, `INSERT INTO rt_note (pid, key) VALUES ($1, $2)`, pid, n.IdempotencyKey)
		<-ctx.Done()
		return ctx.Err()
	})
	e, err := trigger.New(trigger.Config{Store: killedAfterWaiting{s, pool, 2}, MaxConcurrent: 4, RunTimeout: 3 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: draftingExec(pool)},
		Notifiers: map[string]trigger.Notifier{"chat": chat}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = e.Run(ctx) // until it kills itself
}

// Two runs go waiting for approval on replica A, a process that is killed
// (SIGKILL) the moment the second is recorded: before it tells the user
// anything. Then
//
//   - the request for each approval still reaches the user, once, with
//     its key, from replica B (queued with the waiting run's record);
//   - the user approves one run through B: it succeeds with the answer,
//     its task COMPLETED, the answer told once, and it is never executed
//     again (the killed replica's job of it, rescued by River, finds the
//     task done);
//   - the other, which nobody answers, expires at its time on replica C,
//     started after B was stopped (no process that saw it go waiting is
//     left), late by no more than a River leader's loss allows, and the
//     user is told once.
func TestApprovalsOfAKilledReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a River leader's term, about 20 s")
	}
	schema := newSchema(t)
	pool := poolIn(t, schema)
	ctx := context.Background()
	s, err := rivertrigger.New(pool, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE rt_exec (run_id text NOT NULL, pid int NOT NULL, attempt int NOT NULL, finished bool NOT NULL DEFAULT false)`,
		`CREATE TABLE rt_note (pid int NOT NULL, key text NOT NULL)`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var told []trigger.Notification
	chat := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, n)
		return nil
	})
	tellings := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for _, n := range told {
			if n.IdempotencyKey == key {
				c++
			}
		}
		return c
	}
	replica := func() *trigger.Engine {
		s, err := rivertrigger.New(pool, killConfig())
		if err != nil {
			t.Fatal(err)
		}
		e, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 4, RunTimeout: 3 * time.Second,
			Executors: map[string]trigger.Executor{trigger.DefaultExecutor: draftingExec(pool)},
			Notifiers: map[string]trigger.Notifier{"chat": chat}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	b := replica()
	due := time.Now().Add(2 * time.Second)
	for id, ttl := range map[string]string{"ask": "1h", "lapse": "6s"} {
		task := oneTime("acme", id, due)
		task.Output = trigger.Output{Channel: "chat", Target: "user-1"}
		task.Action.Instruction = ttl
		task.Retry.Backoff = 200 * time.Millisecond // a rescued job comes back at once
		if err := b.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestApprovalKillChild$", "-test.count", "1")
	child.Env = append(os.Environ(), childSchema+"="+schema, approvalChild+"=1")
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	t.Cleanup(func() {
		_ = child.Process.Kill()
		<-exited
	})
	var killedAt time.Time
	select {
	case err := <-exited:
		killedAt = time.Now()
		exited <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the child replica ended with %v, not killed", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child replica did not record both runs waiting")
	}
	run := map[string]trigger.Run{}
	for _, id := range []string{"ask", "lapse"} {
		runs, err := b.Runs(ctx, "acme", id, 0)
		if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunWaiting {
			t.Fatalf("%s after the kill: %+v, %v; want one run waiting", id, runs, err)
		}
		run[id] = runs[0]
	}

	_, stopB := engineRun(t, b)
	askKey := trigger.NotificationKey(run["ask"].ID, trigger.NotifyApproval)
	// Held by the killed replica's channel, the request is delivered after
	// River rescues its job; queued but not taken, at once.
	waitFor(t, 60*time.Second, "the approval request on B", func() (bool, error) { return tellings(askKey) > 0, nil })
	mu.Lock()
	for _, n := range told {
		if n.IdempotencyKey == askKey && (n.Kind != trigger.NotifyApproval || n.RunID != run["ask"].ID ||
			n.Metadata["approval_ids"] != "ap-ask" || n.Target != "user-1") {
			t.Errorf("the approval request: %+v", n)
		}
	}
	mu.Unlock()
	if err := b.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: "ask", ApprovalID: "ap-ask",
		Outcome: trigger.OutcomeApproved, Result: "Sent to the team."}); err != nil {
		t.Fatal(err)
	}
	resultKey := trigger.NotificationKey(run["ask"].ID, trigger.NotifyResult)
	waitFor(t, 20*time.Second, "the answer told", func() (bool, error) { return tellings(resultKey) > 0, nil })
	if task, err := b.Get(ctx, "acme", "ask"); err != nil || task.Status != trigger.StatusCompleted {
		t.Fatalf("the approved task: %+v, %v", task, err)
	}
	stopB()

	c := replica()
	engineRun(t, c)
	expiredKey := trigger.NotificationKey(run["lapse"].ID, trigger.NotifyExpired)
	waitFor(t, 60*time.Second, "the expiry told", func() (bool, error) { return tellings(expiredKey) > 0, nil })
	runs, err := c.Runs(ctx, "acme", "lapse", 0)
	if err != nil || len(runs) != 1 {
		t.Fatal(runs, err)
	}
	r, expires := runs[0], runs[0].Approvals[0].ExpiresAt
	latest := expires.Add(leaderHandoverBound)
	if lost := killedAt.Add(leaderLossBound); lost.After(latest) {
		latest = lost
	}
	if r.Status != trigger.RunExpired || r.Approvals[0].Outcome != trigger.OutcomeExpired ||
		r.FinishedAt.Before(expires) || r.FinishedAt.After(latest) {
		t.Fatalf("the unanswered run: %+v; want expired at %s, by %s", r, expires, latest)
	}
	t.Logf("expired %s after its time (the leader was killed %s before it)", r.FinishedAt.Sub(expires), expires.Sub(killedAt))

	// The killed replica's jobs of both runs come back (River's rescue),
	// find nothing to run and are done with.
	waitFor(t, 60*time.Second, "the killed replica's jobs rescued and worked", func() (bool, error) {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1
			AND state IN ('running', 'retryable', 'available', 'scheduled')`, rivertrigger.JobKind).Scan(&n)
		return n == 0, err
	})
	time.Sleep(500 * time.Millisecond) // a repeat of any notice would show by now
	for what, key := range map[string]string{"request": askKey, "answer": resultKey, "expiry": expiredKey} {
		if got := tellings(key); got != 1 {
			t.Errorf("the %s (%s) was told %d times, want once", what, key, got)
		}
	}
	if got := tellings(trigger.NotificationKey(run["lapse"].ID, trigger.NotifyApproval)); got > 1 {
		t.Errorf("the unanswered run's request was told %d times", got)
	}
	var execs, runIDs int
	if err := pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT run_id) FROM rt_exec`).Scan(&execs, &runIDs); err != nil {
		t.Fatal(err)
	}
	if execs != 2 || runIDs != 2 {
		t.Errorf("%d executions of %d runs; want each of the 2 runs executed once", execs, runIDs)
	}
	if task, err := c.Get(ctx, "acme", "ask"); err != nil || task.Status != trigger.StatusCompleted {
		t.Errorf("the approved task after the rescue: %+v, %v", task, err)
	}
}
