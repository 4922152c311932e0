package agentexec_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// A daily task whose 08:00 run the SpendGuard refuses because today's
// spending limit is reached is not killed by it: the limit resets
// tomorrow, and so the task stays active, due at its next time, instead
// of going DEAD (never to run again) once its attempts are refused.
func TestSpendRefusedDailyTaskStaysScheduled(t *testing.T) {
	ctx := context.Background()
	model := llmtest.NewScript(llmtest.Text("never"))
	clk := clocktest.New(time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC)) // one clock for the guard and the engine
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.01}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Record(ctx, "u1", agent.Consumed{CostUSD: 0.02}); err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, model, nil, agent.Config{SpendGuard: g, Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 1, OutputPerMillion: 2}}})
	e, err := trigger.New(trigger.Config{
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})},
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
	got := runFirstFiring(t, e, clk)
	if model.Calls() != 0 {
		t.Fatal("a refused run called the model")
	}
	if next := time.Date(2026, 6, 2, 8, 0, 0, 0, time.UTC); got.Status != trigger.StatusActive || !got.NextRun.Equal(next) {
		t.Fatalf("after a run refused by today's spending limit the task is %s, next run %s; want %s, next run %s",
			got.Status, got.NextRun, trigger.StatusActive, next)
	}
}

// What the user is told about a triggered run the SpendGuard refused is
// the guard's reason for the user, never the figures it keeps for the
// logs: a global limit's refusal does not send the user how much all
// tenants spent and what the service's limit is.
func TestSpendRefusedTaskDoesNotTellTheUserTheServiceFigures(t *testing.T) {
	ctx := context.Background()
	model := llmtest.NewScript(llmtest.Text("never"))
	clk := clocktest.New(time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC)) // one clock for the guard and the engine
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Global: agent.Limits{DailyUSD: 1234.5}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Record(ctx, "another-tenant", agent.Consumed{CostUSD: 1300}); err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, model, nil, agent.Config{SpendGuard: g, Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 1, OutputPerMillion: 2}}})
	notes := make(chan trigger.Notification, 4)
	e, err := trigger.New(trigger.Config{
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})},
		Notifiers: map[string]trigger.Notifier{"chat": trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
			notes <- n
			return nil
		})},
		Clock:  clk,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	task := scheduleTask("digest", "Summarise my unread mail.")
	task.Status = ""
	task.Output = trigger.Output{Channel: "chat", Target: "u1"}
	task.Retry = trigger.Retry{MaxAttempts: 1}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	runFirstFiring(t, e, clk)
	select {
	case n := <-notes:
		for _, leak := range []string{"1300", "1234", "all tenants", "another-tenant"} {
			if strings.Contains(n.Text, leak) {
				t.Fatalf("the user is told the service's figures (%q): %q", leak, n.Text)
			}
		}
	case <-time.After(10 * time.Second):
		// No notification at all (the refused run no longer fails the
		// task): nothing leaked.
	}
}

// runFirstFiring runs e until the 08:00 firing of task digest of u1 has
// finished (the clock starts at 07:00) and returns the task then.
func runFirstFiring(t *testing.T, e *trigger.Engine, clk *clocktest.Clock) *trigger.Task {
	t.Helper()
	ctx := context.Background()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
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
	return got
}
