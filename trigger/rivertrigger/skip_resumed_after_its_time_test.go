package rivertrigger_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
)

// Skip-policy tasks paused over their time and resumed after it: the time
// missed while paused does not run late on River — the daily task goes
// on at tomorrow's time, the one-time task never runs its stale time.
func TestSkipPolicyTaskResumedAfterItsTimeDoesNotRunLateOnRiver(t *testing.T) {
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
	for _, task := range []*trigger.Task{once, daily} {
		if err := engine.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		if _, err := engine.Pause(ctx, "acme", task.ID); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(day.Add(10 * time.Hour)) // 10:00: the 08:00 time passed while paused
	for _, id := range []string{"once", "daily"} {
		if _, err := engine.Resume(ctx, "acme", id); err != nil {
			t.Logf("resume %s: %v", id, err)
		}
	}
	if _, err := store.WorkDue(ctx, engine, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 0 {
		t.Fatalf("ran %v at 10:00; want nothing: the 08:00 time was missed under Skip", ran)
	}
	got, err := engine.Get(ctx, "acme", "daily")
	if err != nil {
		t.Fatal(err)
	}
	if tomorrow := day.Add(32 * time.Hour); got.Status != trigger.StatusActive || !got.NextRun.Equal(tomorrow) {
		t.Fatalf("daily task resumed at 10:00: %s, next %s; want ACTIVE, next %s", got.Status, got.NextRun, tomorrow)
	}
}
