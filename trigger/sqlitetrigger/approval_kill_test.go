package sqlitetrigger_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// approvalChild selects, with childFile, the child process of
// TestKilledAfterTheWaitingRecord (TestApprovalKillChild).
const approvalChild = "SQLITETRIGGER_TEST_APPROVAL_CHILD"

// killedAfterWaiting is the child's Store: the process kills itself
// (SIGKILL) the moment the record of a run waiting for approval commits,
// before anything that follows it (the request's delivery included).
type killedAfterWaiting struct{ *sqlitetrigger.Store }

func (k killedAfterWaiting) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	err := k.Store.Finish(ctx, r, t)
	if err == nil && r.Status == trigger.RunWaiting {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // dies here
	}
	return err
}

// draftingExec records each execution in rt_exec and ends the run waiting
// for the approval of an email, expiring in an hour.
func draftingExec(db *sql.DB) trigger.Executor {
	pid := os.Getpid()
	return trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if _, err := db.ExecContext(ctx, `INSERT INTO rt_exec (run_id, pid, attempt) VALUES (?, ?, ?)`,
			run.RunID, pid, run.Attempt); err != nil {
			return trigger.ExecResult{}, err
		}
		return trigger.ExecResult{Result: "I drafted the email; shall I send it?",
			Approvals: []trigger.Approval{{ID: "ap-" + run.Task.ID, Summary: "Send the email to the team",
				ExpiresAt: run.DueAt.Add(time.Hour)}}}, nil
	})
}

// TestApprovalKillChild is the process TestKilledAfterTheWaitingRecord
// starts and that kills itself; it does nothing otherwise.
func TestApprovalKillChild(t *testing.T) {
	path := os.Getenv(childFile)
	if path == "" || os.Getenv(approvalChild) == "" {
		t.Skip("the child process of TestKilledAfterTheWaitingRecord")
	}
	db := sqlitetest.OpenPath(t, path, 1)
	s, err := sqlitetrigger.New(db, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	e, err := trigger.New(trigger.Config{Store: killedAfterWaiting{s}, MaxConcurrent: 2, RunTimeout: time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: draftingExec(db)},
		Notifiers: map[string]trigger.Notifier{"chat": trigger.NotifierFunc(func(context.Context, trigger.Notification) error {
			t.Error("the child told the user something before it died")
			return nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_ = e.Run(ctx) // until it kills itself
}

// A process is killed (SIGKILL) the moment a run's waiting record
// commits, before it tells the user anything. The parent reopens the
// file: the approval request reaches the user once (queued with the
// record), the approval settles the run (SUCCEEDED, task COMPLETED, the
// answer told once), and the run is executed once — the killed process's
// job of it, rescued by River, finds nothing to run.
func TestKilledAfterTheWaitingRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for River's rescue, about a minute")
	}
	path := filepath.Join(t.TempDir(), "valet.db")
	db := sqlitetest.OpenPath(t, path, 1)
	s, err := sqlitetrigger.New(db, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE rt_exec (run_id TEXT NOT NULL, pid INTEGER NOT NULL, attempt INTEGER NOT NULL, finished INTEGER NOT NULL DEFAULT 0)`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	told := map[string]int{}
	engine := func(s *sqlitetrigger.Store, db *sql.DB) *trigger.Engine {
		e, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 2, RunTimeout: time.Second,
			Executors: map[string]trigger.Executor{trigger.DefaultExecutor: draftingExec(db)},
			Notifiers: map[string]trigger.Notifier{"chat": trigger.NotifierFunc(func(_ context.Context, n trigger.Notification) error {
				mu.Lock()
				told[n.IdempotencyKey]++
				mu.Unlock()
				return nil
			})}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	tellings := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		return told[key]
	}
	task := oneTime("acme", "ask", time.Now().Add(500*time.Millisecond))
	task.Output = trigger.Output{Channel: "chat", Target: "user-1"}
	task.Retry.Backoff = 200 * time.Millisecond
	if err := engine(s, db).CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run", "^TestApprovalKillChild$", "-test.count", "1")
	child.Env = append(os.Environ(), childFile+"="+path, approvalChild+"=1")
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
	select {
	case err := <-exited:
		exited <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the child ended with %v, not killed", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not record the run waiting")
	}

	db2 := sqlitetest.OpenPath(t, path, 1)
	s2, err := sqlitetrigger.New(db2, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e := engine(s2, db2)
	runs, err := e.Runs(ctx, "acme", "ask", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunWaiting {
		t.Fatalf("after the kill: %+v, %v; want one run waiting", runs, err)
	}
	run := runs[0]
	runEngine(t, e)
	askKey := trigger.NotificationKey(run.ID, trigger.NotifyApproval)
	waitFor(t, 30*time.Second, "the approval request", func() (bool, error) { return tellings(askKey) > 0, nil })
	if err := e.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: "ask", ApprovalID: "ap-ask",
		Outcome: trigger.OutcomeApproved, Result: "Sent to the team."}); err != nil {
		t.Fatal(err)
	}
	resultKey := trigger.NotificationKey(run.ID, trigger.NotifyResult)
	waitFor(t, 20*time.Second, "the answer told", func() (bool, error) { return tellings(resultKey) > 0, nil })
	if task, err := e.Get(ctx, "acme", "ask"); err != nil || task.Status != trigger.StatusCompleted {
		t.Fatalf("the approved task: %+v, %v", task, err)
	}
	// The killed process's job of the run comes back (River's rescue),
	// finds nothing to run and is done with.
	waitFor(t, 90*time.Second, "the killed process's job rescued and worked", func() (bool, error) {
		var n int
		err := db2.QueryRow(`SELECT count(*) FROM river_job WHERE kind = ?
			AND state IN ('running', 'retryable', 'available', 'scheduled')`, sqlitetrigger.JobKind).Scan(&n)
		return n == 0, err
	})
	time.Sleep(500 * time.Millisecond) // a repeat of any notice would show by now
	for what, key := range map[string]string{"request": askKey, "answer": resultKey} {
		if got := tellings(key); got != 1 {
			t.Errorf("the %s (%s) was told %d times, want once", what, key, got)
		}
	}
	var execs int
	if err := db2.QueryRow(`SELECT count(*) FROM rt_exec`).Scan(&execs); err != nil {
		t.Fatal(err)
	}
	if execs != 1 {
		t.Errorf("%d executions, want 1", execs)
	}
	runs, err = e.Runs(ctx, "acme", "ask", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "Sent to the team." {
		t.Errorf("runs at the end: %+v, %v", runs, err)
	}
}
