package sqlitetrigger_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// A task scheduled in the file by one process, which closes it, fires
// after another opens the file again.
func TestTaskScheduledBeforeARestartFiresAfterIt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	ctx := context.Background()
	var calls atomic.Int32
	exec := trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
		calls.Add(1)
		return trigger.ExecResult{Result: "sent"}, nil
	})
	{
		s, db := newStoreAt(t, path)
		e, err := trigger.New(trigger.Config{Store: s, Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec}})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateTask(ctx, oneTime("alice", "remind", time.Now().Add(time.Second))); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(1500 * time.Millisecond) // due while no process has the file open
	s, db := newStoreAt(t, path)
	e, _ := engineOn(t, s, exec)
	waitFor(t, 20*time.Second, "the task COMPLETED after the restart", statusIs(e, "alice", "remind", trigger.StatusCompleted))
	runs, err := e.Runs(ctx, "alice", "remind", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "sent" {
		t.Fatalf("runs = %+v, %v", runs, err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
	if st := jobStates(t, db, "remind"); st["completed"] != 1 || len(st) != 1 {
		t.Errorf("jobs: %v", st)
	}
}

// Two Stores of one process on one file: the second's engine is refused
// while the first dispatches, and runs once the first has stopped.
func TestSecondDispatcherOnTheFileRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	s1, _ := newStoreAt(t, path)
	s2, _ := newStoreAt(t, path)
	noop := trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{}, nil
	})
	e1, stop1 := engineOn(t, s1, noop)
	ctx := context.Background()
	// e1 holds the lock once its Run has started dispatching: a task run
	// through it shows it does.
	if err := e1.CreateTask(ctx, oneTime("a", "first", time.Now().Add(100*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the first engine dispatching", statusIs(e1, "a", "first", trigger.StatusCompleted))
	e2, err := trigger.New(trigger.Config{Store: s2, Executors: map[string]trigger.Executor{trigger.DefaultExecutor: noop}})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err = e2.Run(rctx)
	if !errors.Is(err, sqlitetrigger.ErrDispatching) || !strings.Contains(err.Error(), path+"-valet-trigger.lock") {
		t.Fatalf("the second engine's Run = %v, want ErrDispatching naming the lock file", err)
	}
	if err := stop1(); err != nil {
		t.Fatal(err)
	}
	stop2 := runEngine(t, e2)
	if err := e2.CreateTask(ctx, oneTime("a", "second", time.Now().Add(100*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the second engine dispatching after the first stopped", statusIs(e2, "a", "second", trigger.StatusCompleted))
	if err := stop2(); err != nil {
		t.Fatal(err)
	}
}

// A process that opens the file without dispatching (a command-line tool,
// an admin page) creates a task; the dispatching process runs it.
func TestTaskCreatedByANonDispatchingStoreRuns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	s1, _ := newStoreAt(t, path)
	s2, _ := newStoreAt(t, path)
	var calls atomic.Int32
	e1, _ := engineOn(t, s1, trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
		calls.Add(1)
		return trigger.ExecResult{}, nil
	}))
	tool, err := trigger.New(trigger.Config{Store: s2, Executors: map[string]trigger.Executor{
		trigger.DefaultExecutor: trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
			t.Error("the tool's engine, which does not run, executed a run")
			return trigger.ExecResult{}, nil
		})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := tool.CreateTask(ctx, oneTime("a", "from-the-tool", time.Now().Add(200*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the tool's task run by the dispatching engine", statusIs(e1, "a", "from-the-tool", trigger.StatusCompleted))
	if n := calls.Load(); n != 1 {
		t.Errorf("%d executions, want 1", n)
	}
}
