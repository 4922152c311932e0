package rivertrigger_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// A task made DEAD because River discarded its run's job behind valet's
// back (a worker that died on the last attempt) is told as any DEAD task:
// the Observer hears LifecycleDead and the task's channel gets
// NotifyFailure, once.
func TestLostJobTellsObserverAndChannel(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{ReconcileInterval: 200 * time.Millisecond})
	ctx := context.Background()
	var mu sync.Mutex
	var steps []trigger.LifecycleKind
	var notes []trigger.Notification
	e, err := trigger.New(trigger.Config{
		Store: s,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
				return trigger.ExecResult{Result: "done"}, nil
			})},
		Notifiers: map[string]trigger.Notifier{"slack": trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
			mu.Lock()
			notes = append(notes, n)
			mu.Unlock()
			return nil
		})},
		Observer: func(l trigger.Lifecycle) {
			if l.TaskID == "lost" {
				mu.Lock()
				steps = append(steps, l.Kind)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() { stop(); <-done }()

	task := oneTime("carol", "lost", time.Now().Add(time.Hour))
	task.Output = trigger.Output{Channel: "slack", Target: "#ops"}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE river_job SET state = 'discarded', finalized_at = now(),
		errors = ARRAY['{"error": "worker died", "attempt": 3, "at": "2026-01-01T00:00:00Z"}'::jsonb]
		WHERE kind = $1 AND args->>'task_id' = 'lost'`, rivertrigger.JobKind); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the task DEAD", statusIs(e, "carol", "lost", trigger.StatusDead))
	waitFor(t, 10*time.Second, "the Observer and the channel told", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(notes) > 0 && len(steps) > 0 && steps[len(steps)-1] == trigger.LifecycleDead, nil
	})
	// Another pass of the reconciler reads the job again: nothing more.
	time.Sleep(600 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(notes) != 1 || notes[0].Kind != trigger.NotifyFailure || notes[0].Target != "#ops" ||
		!strings.Contains(notes[0].Text, "worker died") || notes[0].RunID != trigger.RunID("lost", task.NextRun) {
		t.Fatalf("notifications = %+v; want one NotifyFailure of the lost run", notes)
	}
	dead := 0
	for _, k := range steps {
		if k == trigger.LifecycleDead {
			dead++
		}
	}
	if dead != 1 {
		t.Fatalf("observer heard %v; want LifecycleDead once", steps)
	}
}
