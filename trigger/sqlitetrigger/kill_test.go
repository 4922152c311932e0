package sqlitetrigger_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// childFile names the database file a child process of the kill test
// works on; the test binary started with it set runs the child test only.
const childFile = "SQLITETRIGGER_TEST_CHILD_FILE"

// killConfig is the store configuration of the child and of the process
// after it: a short rescue delay, so that the killed process's run comes
// back within the test.
func killConfig() sqlitetrigger.Config {
	return sqlitetrigger.Config{
		MaxWorkers:           2,
		JobTimeout:           2 * time.Second,
		RescueStuckJobsAfter: 3 * time.Second,
		FetchPollInterval:    100 * time.Millisecond,
	}
}

// TestKillChild is the engine TestKilledMidRunRunsAgainOnce starts in a
// child process: its executor records the run's start in rt_exec, waits
// until the parent writes a row in rt_kill, and kills its own process
// (SIGKILL) mid-run. It does nothing otherwise.
func TestKillChild(t *testing.T) {
	path := os.Getenv(childFile)
	if path == "" || os.Getenv(approvalChild) != "" {
		t.Skip("the child engine of TestKilledMidRunRunsAgainOnce")
	}
	db := sqlitetest.OpenPath(t, path, 1)
	s, err := sqlitetrigger.New(db, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	e, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 2, RunTimeout: time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
				if _, err := db.ExecContext(ctx, `INSERT INTO rt_exec (run_id, pid, attempt) VALUES (?, ?, ?)`,
					run.RunID, pid, run.Attempt); err != nil {
					return trigger.ExecResult{}, err
				}
				for {
					var n int
					if err := db.QueryRowContext(ctx, `SELECT count(*) FROM rt_kill`).Scan(&n); err == nil && n > 0 {
						_ = syscall.Kill(pid, syscall.SIGKILL)
						select {} // dies here
					}
					time.Sleep(20 * time.Millisecond)
				}
			})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestKilledMidRunRunsAgainOnce kills (SIGKILL) a child process whose
// engine has a run under way. While the child dispatches, the parent's
// engine on the same file is refused (ErrDispatching); once it is dead,
// the parent reopens the file, River rescues the job, and the run runs
// again once, as attempt 2, and is recorded once — what rivertrigger
// does with a killed replica's runs.
func TestKilledMidRunRunsAgainOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about a minute: River's leader and rescuer take their time")
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
	for _, q := range []string{
		`CREATE TABLE rt_exec (run_id TEXT NOT NULL, pid INTEGER NOT NULL, attempt INTEGER NOT NULL, finished INTEGER NOT NULL DEFAULT 0)`,
		`CREATE TABLE rt_kill (one INTEGER)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// The parent's engine, not running yet, creates the task.
	parentExec := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if _, err := db.ExecContext(ctx, `INSERT INTO rt_exec (run_id, pid, attempt, finished) VALUES (?, ?, ?, 1)`,
			run.RunID, os.Getpid(), run.Attempt); err != nil {
			return trigger.ExecResult{}, err
		}
		return trigger.ExecResult{Result: "ok"}, nil
	})
	second, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 2, RunTimeout: time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: parentExec}})
	if err != nil {
		t.Fatal(err)
	}
	if err := second.CreateTask(ctx, oneTime("alice", "report", time.Now().Add(500*time.Millisecond))); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run", "^TestKillChild$", "-test.count", "1")
	child.Env = append(os.Environ(), childFile+"="+path)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	child.Args = append(child.Args, "-test.v")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	cpid := child.Process.Pid
	defer func() {
		if t.Failed() {
			rows, err := db.Query(`SELECT id, kind, state, attempt, scheduled_at, coalesce(json(errors), '') FROM river_job`)
			t.Logf("query: %v", err)
			for rows != nil && rows.Next() {
				var id, attempt int
				var kind, state, at, errs string
				_ = rows.Scan(&id, &kind, &state, &attempt, &at, &errs)
				t.Logf("job %d %s %s attempt %d at %s errors %s (now %s)", id, kind, state, attempt, at, errs, time.Now().UTC())
			}
		}
	}()
	waitFor(t, 60*time.Second, "the child's run under way", func() (bool, error) {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM rt_exec WHERE pid = ?`, cpid).Scan(&n)
		return n == 1, err
	})

	// A second engine on the file while the child dispatches is refused.
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := second.Run(rctx); !errors.Is(err, sqlitetrigger.ErrDispatching) {
		t.Fatalf("a second engine on the file while the child dispatches: Run = %v, want ErrDispatching", err)
	}

	if _, err := db.Exec(`INSERT INTO rt_kill VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	werr := child.Wait()
	exited = true
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child ended with %v, not SIGKILL", werr)
	}

	// The parent reopens the file, as a restarted process would.
	db2 := sqlitetest.OpenPath(t, path, 1)
	s2, err := sqlitetrigger.New(db2, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	e2, err := trigger.New(trigger.Config{Store: s2, MaxConcurrent: 2, RunTimeout: time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: parentExec}})
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e2)
	waitFor(t, 90*time.Second, "the task COMPLETED after the rescue", statusIs(e2, "alice", "report", trigger.StatusCompleted))

	runs, err := e2.Runs(ctx, "alice", "report", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Attempt != 2 {
		t.Fatalf("runs = %+v, want one succeeded as attempt 2", runs)
	}
	type exe struct {
		pid, attempt int
		finished     bool
	}
	var got []exe
	rows, err := db2.Query(`SELECT pid, attempt, finished FROM rt_exec ORDER BY rowid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var x exe
		if err := rows.Scan(&x.pid, &x.attempt, &x.finished); err != nil {
			t.Fatal(err)
		}
		got = append(got, x)
	}
	rows.Close()
	want := []exe{{cpid, 1, false}, {os.Getpid(), 2, true}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("executions %+v, want the child's attempt 1 unfinished and one rescue, attempt 2", got)
	}
	if st := jobStates(t, db2, "report"); st["completed"] != 1 || len(st) != 1 {
		t.Errorf("jobs of the task: %v, want one completed", st)
	}
}
