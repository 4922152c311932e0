package trigger_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/valetkit/valet/trigger"
)

// The first thing a scheduler builds: an Engine from a Config whose zero
// fields mean their documented defaults (an in-memory store and bus, the
// system clock). Executors carry out the tasks' actions by name; an
// ExecutorFunc is the smallest one (trigger/agentexec hands a task to the
// assistant). Engine.Run is the scheduler; RunNow runs a task at once.
func Example() {
	digest := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "3 unread mails: " + run.Task.Action.Instruction}, nil
	})
	engine, err := trigger.New(trigger.Config{
		Executors: map[string]trigger.Executor{"digest": digest},
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	task := &trigger.Task{
		ID:       "morning",
		TenantID: "alice",
		Name:     "Morning digest",
		Trigger:  trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 8 * * *", Zone: "Europe/Paris"}},
		Executor: "digest",
		Action:   trigger.Action{Instruction: "summarise my inbox"},
	}
	if err := engine.CreateTask(ctx, task); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created:", task.Status, "next run set:", !task.NextRun.IsZero())

	run, err := engine.RunNow(ctx, "alice", "morning")
	fmt.Println(run.Status, run.Attempt, run.Result, err)
	runs, _ := engine.Runs(ctx, "alice", "morning", 0)
	fmt.Println("runs in the history:", len(runs))
	// Output:
	// created: ACTIVE next run set: true
	// succeeded 1 3 unread mails: summarise my inbox <nil>
	// runs in the history: 1
}
