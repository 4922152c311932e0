package agentexec_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

func Example() {
	ctx := context.Background()
	// A scripted model, answering the one run below.
	model := llmtest.NewScript(llmtest.Text("3 unread mails, none urgent."))
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	exec, err := agentexec.New(o, agentexec.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	engine, err := trigger.New(trigger.Config{
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Clock:     clocktest.New(time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	task := &trigger.Task{
		ID:       "digest",
		TenantID: "u1",
		Name:     "Morning digest",
		Trigger: trigger.Trigger{
			Kind:     trigger.KindSchedule,
			Schedule: trigger.Schedule{Cron: "0 8 * * *", Zone: "Europe/Paris"},
		},
		Action: trigger.Action{Instruction: "Summarise my unread mail."},
		Budget: trigger.Budget{MaxToolCalls: 5},
	}
	if err := engine.CreateTask(ctx, task); err != nil {
		fmt.Println(err)
		return
	}
	run, err := engine.RunNow(ctx, "u1", "digest")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(run.Status, "-", run.Result)
	// What the model was sent, as the user's message.
	msgs := model.Requests()[0].Messages
	fmt.Println(msgs[len(msgs)-1].Content)
	// Output:
	// succeeded - 3 unread mails, none urgent.
	// [Scheduled Task] Summarise my unread mail.
}
