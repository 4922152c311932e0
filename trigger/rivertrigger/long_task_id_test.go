package rivertrigger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
)

// A task whose id is as long as MaxIDLen allows runs on River: its run id
// is shortened to fit, the run is recorded and the task moves on; and
// when its attempts all fail, the task ends DEAD with its dead run
// recorded, not with its job discarded and the task left ACTIVE.
func TestLongTaskIDRunsAndDiesOnRiver(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(day.Add(7 * time.Hour))
	fail := false
	store, engine, _, _ := workDueSetup(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if len(run.RunID) > trigger.MaxIDLen {
			return trigger.ExecResult{}, errors.New("run id too long")
		}
		if fail {
			return trigger.ExecResult{}, errors.New("the mail server is down")
		}
		return trigger.ExecResult{Result: "sent"}, nil
	})
	id := strings.Repeat("é", trigger.MaxIDLen/2) // 254 bytes of two-byte runes
	task := dailyTask(id)
	task.Retry = trigger.Retry{MaxAttempts: 1}
	if err := engine.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	clk.Set(day.Add(8 * time.Hour))
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 1 {
		t.Fatalf("WorkDue at 08:00 = %d, %v; want 1", n, err)
	}
	runs, err := engine.Runs(ctx, "acme", id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || len(runs[0].ID) > trigger.MaxIDLen ||
		runs[0].ID != trigger.RunID(id, day.Add(8*time.Hour)) {
		t.Fatalf("runs of the long-id task: %+v", runs)
	}

	fail = true
	clk.Set(day.Add(32 * time.Hour))
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 1 {
		t.Fatalf("WorkDue the next day = %d, %v; want 1", n, err)
	}
	got, err := engine.Get(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	runs, err = engine.Runs(ctx, "acme", id, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != trigger.StatusDead || len(runs) != 1 || runs[0].Status != trigger.RunDead ||
		!strings.Contains(runs[0].Error, "mail server") {
		t.Fatalf("after the failed last attempt: task %s, runs %+v; want DEAD with the dead run", got.Status, runs)
	}
}
