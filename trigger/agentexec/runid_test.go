package agentexec_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// A triggered run's record carries the RunID of the orchestrator's run,
// the ID on every log line of that run.
func TestRunRecordCarriesAgentRunID(t *testing.T) {
	ctx := context.Background()
	var s seen
	o := newOrch(t, llmtest.NewStrictScript(t, llmtest.Text("Done.")), &s, agent.Config{})
	clk := clocktest.New(time.Date(2026, 6, 1, 7, 0, 0, 0, time.UTC))
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
	clk.Advance(time.Date(2026, 6, 1, 8, 0, 30, 0, time.UTC).Sub(clk.Now()))
	var runs []trigger.Run
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		runs, err = e.Runs(ctx, "u1", "digest", 0)
		if err == nil && len(runs) == 1 && runs[0].Status != trigger.RunRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no finished run: %+v, %v", runs, err)
		}
	}
	_, res := s.last(t)
	if res.RunID == "" || runs[0].AgentRunID != res.RunID || runs[0].Status != trigger.RunSucceeded {
		t.Fatalf("run record %+v: want AgentRunID %q", runs[0], res.RunID)
	}
}

// A failed attempt reports its orchestrator run's ID too.
func TestFailedAttemptCarriesAgentRunID(t *testing.T) {
	model := llmtest.NewScript(llmtest.Fail(&llm.Error{Kind: llm.KindAuth, StatusCode: 401, Message: "invalid api key"}))
	o := newOrch(t, model, nil, agent.Config{})
	res, err := execute(t, newExec(t, o, agentexec.Config{}), trigger.ExecRun{Task: scheduleTask("daily", "Summarise.")})
	if err == nil || !strings.HasPrefix(res.AgentRunID, "run_") {
		t.Fatalf("result %+v, %v: want an error and the agent run's ID", res, err)
	}
}
