package agentexec_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
	"github.com/valetkit/valet/trigger/triggertest"
)

// A daily task whose 08:00 run the SpendGuard refuses because today's
// spending limit is reached is not killed by it: the limit resets
// tomorrow, and so the task stays active, due at its next time, instead
// of going DEAD (never to run again) once its attempts are refused.
func TestSpendRefusedDailyTaskStaysScheduled(t *testing.T) {
	ctx := context.Background()
	model := llmtest.NewScript(llmtest.Text("never"))
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.01},
		Now: func() time.Time { return time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Record(ctx, "u1", agent.Consumed{CostUSD: 0.02}); err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, model, nil, agent.Config{SpendGuard: g, Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 1, OutputPerMillion: 2}}})
	clk := triggertest.NewClock(time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC))
	e, err := trigger.New(trigger.Config{
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: agentexec.New(o)},
		Clock:     clk,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	task := scheduleTask("digest", "Summarise my unread mail.")
	task.Status = ""
	task.Retry = trigger.Retry{MaxAttempts: 1}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := clk.AwaitTimers(wait, 1); err != nil {
		t.Fatal("the scheduler is not waiting:", err)
	}
	clk.Advance(time.Hour + 30*time.Second)
	var got *trigger.Task
	for {
		runs, err := e.Runs(ctx, "u1", "digest", 0)
		if err == nil && len(runs) == 1 && runs[0].Status != trigger.RunRunning {
			if got, err = e.Get(ctx, "u1", "digest"); err == nil && !got.LastRun.IsZero() || got != nil && got.Status == trigger.StatusDead {
				break
			}
		}
		if wait.Err() != nil {
			t.Fatalf("the refused run did not finish: %+v, %v", runs, err)
		}
		time.Sleep(time.Millisecond)
	}
	if model.Calls() != 0 {
		t.Fatal("a refused run called the model")
	}
	if next := time.Date(2026, 6, 2, 8, 0, 0, 0, time.UTC); got.Status != trigger.StatusActive || !got.NextRun.Equal(next) {
		t.Fatalf("after a run refused by today's spending limit the task is %s, next run %s; want %s, next run %s",
			got.Status, got.NextRun, trigger.StatusActive, next)
	}
}
