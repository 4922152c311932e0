package rivertrigger_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
)

// With the Skip policy, a time missed while every replica was down does
// not run when River finally delivers its job: a one-time task ends
// EXPIRED (its work was never done), a daily one carries on at its next
// time, as the in-memory engine does. A run delivered within the grace
// still runs, and so does a later attempt of a run that started on time.
func TestSkipPolicyOnRiverDropsRunsMissedInDowntime(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(day.Add(7 * time.Hour))
	var ran []string
	store, engine, _, _ := workDueSetup(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		ran = append(ran, run.Task.ID+" "+run.DueAt.Format(time.TimeOnly))
		return trigger.ExecResult{Result: "done"}, nil
	})
	once := oneTime("acme", "once", day.Add(8*time.Hour))
	once.Trigger.Missed = trigger.Skip
	daily := dailyTask("daily")
	daily.Trigger.Missed = trigger.Skip
	onTime := oneTime("acme", "on-time", day.Add(8*time.Hour))
	onTime.Trigger.Missed = trigger.Skip
	for _, task := range []*trigger.Task{once, daily} {
		if err := engine.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}

	// Down from 07:00 to 10:00: the 08:00 runs come up two hours late.
	clk.Set(day.Add(10 * time.Hour))
	if _, err := store.WorkDue(ctx, engine, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 0 {
		t.Fatalf("ran %v; want nothing: the 08:00 runs were missed under Skip", ran)
	}
	got, err := engine.Get(ctx, "acme", "once")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != trigger.StatusExpired || !got.NextRun.IsZero() {
		t.Fatalf("one-time task after its missed time: %s, next %s; want EXPIRED", got.Status, got.NextRun)
	}
	got, err = engine.Get(ctx, "acme", "daily")
	if err != nil {
		t.Fatal(err)
	}
	if tomorrow := day.Add(32 * time.Hour); got.Status != trigger.StatusActive || !got.NextRun.Equal(tomorrow) {
		t.Fatalf("daily task after its missed time: %s, next %s; want ACTIVE, next %s", got.Status, got.NextRun, tomorrow)
	}
	if runs, err := engine.Runs(ctx, "acme", "once", 0); err != nil || len(runs) != 0 {
		t.Fatalf("runs of the skipped one-time task: %+v, %v; want none", runs, err)
	}
	// Nothing is left queued for the missed time: later calls run nothing
	// until tomorrow 08:00, which runs.
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 0 {
		t.Fatalf("WorkDue again at 10:00 = %d, %v; want 0", n, err)
	}
	clk.Set(day.Add(32 * time.Hour))
	if _, err := store.WorkDue(ctx, engine, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 || ran[0] != "daily 08:00:00" {
		t.Fatalf("ran %v; want the daily task's next 08:00", ran)
	}

	// Delivered 30 s late (within the grace): it runs.
	onTime.Trigger.Schedule.At = day.Add(33 * time.Hour)
	if err := engine.CreateTask(ctx, onTime); err != nil {
		t.Fatal(err)
	}
	clk.Set(day.Add(33*time.Hour + 30*time.Second))
	if _, err := store.WorkDue(ctx, engine, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 2 || ran[1] != "on-time 09:00:00" {
		t.Fatalf("ran %v; want the one-time task delivered within the grace", ran)
	}
	if got, err = engine.Get(ctx, "acme", "on-time"); err != nil || got.Status != trigger.StatusCompleted {
		t.Fatalf("on-time task: %+v, %v; want COMPLETED", got, err)
	}
}

// A run that failed on time under Skip is tried again after its backoff,
// however much later than the grace: its retry is not a missed time.
func TestSkipPolicyOnRiverKeepsRetries(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(day.Add(7 * time.Hour))
	attempts := 0
	store, engine, _, _ := workDueSetup(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		attempts++
		if attempts == 1 {
			return trigger.ExecResult{}, context.DeadlineExceeded
		}
		return trigger.ExecResult{Result: "done"}, nil
	})
	task := oneTime("acme", "retry", day.Add(8*time.Hour))
	task.Trigger.Missed = trigger.Skip
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: 10 * time.Minute}
	if err := engine.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	clk.Set(day.Add(8 * time.Hour))
	if _, err := store.WorkDue(ctx, engine, clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Set(day.Add(8*time.Hour + 30*time.Minute))
	if _, err := store.WorkDue(ctx, engine, clk.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := engine.Get(ctx, "acme", "retry")
	if err != nil {
		t.Fatal(err)
	}
	if attempts != 2 || got.Status != trigger.StatusCompleted {
		t.Fatalf("after the retry 30 minutes late: %d attempts, task %s; want 2 and COMPLETED", attempts, got.Status)
	}
}
