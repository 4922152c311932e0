package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
	"github.com/valetkit/valet/trigger/triggertest"
)

// A user's test of a daily 08:00 digest: one fake clock handed to the
// orchestrator, its memory and the trigger engine; the model scripted by
// purpose (the loop's reply, and the background fact extraction of the
// triggered turn apart from it); the clock moved to 08:00 and the engine
// waited for, without sleeping. Everything reads the same time.
func TestOneClockRunsADailyTask(t *testing.T) {
	ctx := context.Background()
	seven := time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC) // Monday
	clk := clocktest.New(seven)

	model := llmtest.NewStrictScript(t, llmtest.Text("Good morning: 2 new emails.")).
		On(llm.PurposeRememberFacts, llmtest.Remember(llmtest.Fact{Text: "The user reads a digest at 08:00.", Kind: "preference"}))
	mem := newMem(t, memory.Config{Clock: clk})
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:           model,
		Memory:        mem,
		MemoryOptions: agent.MemoryOptions{Extract: true, ExtractTriggered: true},
		Clock:         clk,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := agentexec.New(o, agentexec.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var notes []trigger.Notification
	e, err := trigger.New(trigger.Config{
		Clock:     clk,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Notifiers: map[string]trigger.Notifier{"chat": trigger.NotifierFunc(func(_ context.Context, n trigger.Notification) error {
			mu.Lock()
			defer mu.Unlock()
			notes = append(notes, n)
			return nil
		})},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	err = e.CreateTask(ctx, &trigger.Task{
		ID: "digest", TenantID: "u1", ConversationID: "c1", Name: "Morning digest",
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 8 * * *", Zone: "UTC"}},
		Action:  trigger.Action{Instruction: "Write my morning digest."},
		Output:  trigger.Output{Channel: "chat"},
	})
	if err != nil {
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

	wait, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := clk.AwaitTimers(wait, 1); err != nil { // the scheduler sleeps until 08:00
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	if err := triggertest.WaitIdle(wait, e); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(wait); err != nil { // the background extraction is done
		t.Fatal(err)
	}

	eight := seven.Add(time.Hour)
	mu.Lock()
	if len(notes) != 1 || notes[0].Text != "Good morning: 2 new emails." {
		t.Errorf("notified %+v, want the digest once", notes)
	}
	mu.Unlock()
	runs, err := e.Runs(ctx, "u1", "digest", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || !runs[0].StartedAt.Equal(eight) {
		t.Fatalf("runs %+v, %v; want one succeeded at 08:00", runs, err)
	}
	if task, err := e.Get(ctx, "u1", "digest"); err != nil || !task.NextRun.Equal(eight.Add(24*time.Hour)) {
		t.Fatalf("NextRun %v, %v; want tomorrow 08:00", task.NextRun, err)
	}
	// The orchestrator read the fake clock: the prompt says Monday 08:00.
	reqs := model.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[0].Messages[0].Content, "Monday, 2 March 2026, 08:00") {
		t.Errorf("the model was not told the fake clock's time: %q", reqs[0].Messages[0].Content)
	}
	// The memory read it too: the fact learnt is stamped 08:00.
	items, err := mem.Recall(ctx, "u1", "digest", memory.Budget{MaxEntries: 5})
	if err != nil || len(items) != 1 || !items[0].CreatedAt.Equal(eight) {
		t.Fatalf("recalled %+v, %v; want the fact stamped 08:00", items, err)
	}
}
