package rivertrigger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// An event task made DEAD by its failed run and revived with Retry stays
// ACTIVE when the reconciler of a restarted engine reads the old
// discarded job again (it looks a week back), even after more runs than
// one page of recent history: the run it names ended, recorded dead.
func TestRevivedEventTaskOutlivesItsOldDiscardedJob(t *testing.T) {
	ctx := context.Background()
	// Event jobs are scheduled by the database's time: the fake clock is
	// ahead of it, so WorkDue finds them due.
	clk := clocktest.New(time.Now().Add(time.Hour).Truncate(time.Second))
	store, engine, pool, schema := workDueSetup(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if run.Event != nil && run.Event.ID == "e0" {
			return trigger.ExecResult{}, errors.New("the mailbox is gone")
		}
		return trigger.ExecResult{Result: "done"}, nil
	})
	task := &trigger.Task{ID: "inbox", TenantID: "acme", Name: "inbox",
		Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail"},
		Action:  trigger.Action{Instruction: "summarise it"}, Retry: trigger.Retry{MaxAttempts: 1}}
	if err := engine.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	enqueue := func(id string) {
		t.Helper()
		ev := trigger.Event{ID: id, TenantID: "acme", Source: "gmail", Type: "message.received"}
		if err := store.Enqueue(ctx, trigger.Due{TenantID: "acme", TaskID: "inbox", Attempt: 1, MaxAttempts: 1, Event: &ev}); err != nil {
			t.Fatal(err)
		}
	}
	enqueue("e0")
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 1 {
		t.Fatalf("WorkDue = %d, %v; want the failing event's run", n, err)
	}
	if got, _ := engine.Get(ctx, "acme", "inbox"); got.Status != trigger.StatusDead {
		t.Fatalf("after the failed run: %s, want DEAD", got.Status)
	}
	if _, err := engine.Retry(ctx, "acme", "inbox"); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 25; i++ {
		enqueue(fmt.Sprintf("e%d", i))
	}
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 25 {
		t.Fatalf("WorkDue = %d, %v; want 25 runs", n, err)
	}

	// A marker: another task's job discarded behind valet's back after the
	// old one. The reconciler reads discarded jobs in the order they were
	// finalized, so when the marker's task is DEAD the old job was read.
	marker := oneTime("acme", "marker", time.Now().Add(24*time.Hour))
	if err := engine.CreateTask(ctx, marker); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE `+schema+`.river_job SET state = 'discarded', finalized_at = now() + interval '2 hours'
		WHERE kind = $1 AND args->>'task_id' = 'marker'`, rivertrigger.JobKind); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- engine.Run(runCtx) }()
	defer func() { stop(); <-done }()
	waitFor(t, 20*time.Second, "the reconciler's pass (the marker DEAD)", statusIs(engine, "acme", "marker", trigger.StatusDead))
	got, err := engine.Get(ctx, "acme", "inbox")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != trigger.StatusActive {
		t.Fatalf("the revived event task after the reconciler read its old job: %s, want ACTIVE", got.Status)
	}
}
