package trigger_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/valetkit/valet/trigger"
)

var errNoPrice = errors.New("the model has no price")

// checking is an executor that refuses tasks with a dollar budget when
// they are created.
type checking struct {
	trigger.ExecutorFunc
	checked int
}

func (c *checking) CheckTask(ctx context.Context, t *trigger.Task) error {
	c.checked++
	if t.Budget.MaxCostUSD > 0 {
		return errNoPrice
	}
	return nil
}

// An executor that implements TaskChecker is asked about each task when
// it is created: a task it refuses fails CreateTask at once with
// ErrInvalid (wrapping its error) and is not stored, instead of failing at
// its first run.
func TestCreateTaskAsksTheExecutor(t *testing.T) {
	ctx := context.Background()
	ex := &checking{ExecutorFunc: func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "ok"}, nil
	}}
	e, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{trigger.DefaultExecutor: ex}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	task := &trigger.Task{
		ID: "daily", TenantID: "u1", Name: "daily",
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 8 * * *"}},
		Action:  trigger.Action{Instruction: "Summarise."},
		Budget:  trigger.Budget{MaxCostUSD: 0.5},
	}
	if err := e.CreateTask(ctx, task); !errors.Is(err, trigger.ErrInvalid) || !errors.Is(err, errNoPrice) {
		t.Fatalf("CreateTask = %v, want ErrInvalid wrapping the executor's error", err)
	}
	if _, err := e.Get(ctx, "u1", "daily"); !errors.Is(err, trigger.ErrNotFound) {
		t.Fatalf("the refused task was stored: %v", err)
	}
	task.Budget = trigger.Budget{MaxTokens: 5000}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if ex.checked != 2 {
		t.Fatalf("CheckTask called %d times, want 2", ex.checked)
	}
}
