package trigger_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// dispatchStore is a MemoryStore that is a Dispatcher whose runs the
// test delivers itself through Engine.HandleDue; Finish writes the task
// (ErrConflict on a stale revision, as Store.Update) and the run.
type dispatchStore struct{ *trigger.MemoryStore }

func (s dispatchStore) Dispatch(ctx context.Context, h trigger.DueHandler) error {
	<-ctx.Done()
	return nil
}

func (s dispatchStore) Enqueue(ctx context.Context, d trigger.Due) error { return nil }

func (s dispatchStore) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	if err := s.Update(ctx, t); err != nil {
		return err
	}
	return s.UpdateRun(ctx, r)
}

// A task rescheduled while a Dispatcher's run of it is under way keeps
// the new schedule, and the run is still recorded and reported: the
// engine used to hand the task it did not finish (nil) to the run's
// route and Observer.
func TestRunOfATaskRescheduledMeanwhileIsRecorded(t *testing.T) {
	ctx := context.Background()
	store := dispatchStore{trigger.NewMemoryStore()}
	var (
		mu    sync.Mutex
		heard []trigger.LifecycleKind
	)
	moved := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	exec := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		// An operator's change lands while the run is under way.
		task, err := store.Get(ctx, run.Task.TenantID, run.Task.ID)
		if err != nil {
			return trigger.ExecResult{}, err
		}
		task.NextRun = moved
		if err := store.Update(ctx, task); err != nil {
			return trigger.ExecResult{}, err
		}
		return trigger.ExecResult{Result: "done"}, nil
	})
	e, err := trigger.New(trigger.Config{
		Store:     store,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Observer: func(l trigger.Lifecycle) {
			mu.Lock()
			heard = append(heard, l.Kind)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	task := scheduleTask("t1", "hourly", trigger.Schedule{Every: time.Hour})
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	task, err = e.Get(ctx, "t1", "hourly")
	if err != nil {
		t.Fatal(err)
	}
	err = e.HandleDue(ctx, trigger.Due{TenantID: "t1", TaskID: "hourly", DueAt: task.NextRun, Attempt: 1, MaxAttempts: 3})
	if err != nil {
		t.Fatalf("HandleDue: %v", err)
	}
	runs, err := e.Runs(ctx, "t1", "hourly", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "done" {
		t.Fatalf("runs = %+v, want one succeeded with its result", runs)
	}
	if got, err := e.Get(ctx, "t1", "hourly"); err != nil || !got.NextRun.Equal(moved) {
		t.Fatalf("task after the run: %+v, %v; want the operator's NextRun %v kept", got, err, moved)
	}
	// The Observer hears steps in order but off the run's goroutine.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		found := false
		for _, k := range heard {
			found = found || k == trigger.LifecycleCompleted
		}
		got := append([]trigger.LifecycleKind(nil), heard...)
		mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Observer heard %v, not the completed run", got)
		}
	}
}
