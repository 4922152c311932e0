package agentexec_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// One ID limit: a task the engine accepts runs through the orchestrator
// and memory. A task whose tenant, task and conversation IDs are 255
// bytes runs, and its turn is in the conversation's history; one byte
// more is refused by CreateTask, not by memory at every run.
func TestLongestIDsRunEndToEnd(t *testing.T) {
	if trigger.MaxIDLen != agent.MaxIDLen || agent.MaxIDLen != memory.MaxIDLen {
		t.Fatalf("MaxIDLen: trigger %d, agent %d, memory %d", trigger.MaxIDLen, agent.MaxIDLen, memory.MaxIDLen)
	}
	model := llmtest.NewStrictScript(t, llmtest.Text("3 unread mails."))
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, model, nil, agent.Config{Memory: mem})
	e, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tenant := strings.Repeat("t", trigger.MaxIDLen)
	conv := strings.Repeat("c", trigger.MaxIDLen)
	task := scheduleTask(strings.Repeat("k", trigger.MaxIDLen), "Summarise my unread mail.")
	task.TenantID, task.ConversationID, task.Status, task.Name = tenant, conv, "", "digest"

	over := task.Clone()
	over.ConversationID += "c"
	if err := e.CreateTask(ctx, over); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("CreateTask with a %d-byte conversation: %v, want ErrInvalid", len(over.ConversationID), err)
	}

	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	r, err := e.RunNow(ctx, tenant, task.ID)
	if err != nil || r.Status != trigger.RunSucceeded || r.Result != "3 unread mails." {
		t.Fatalf("run %+v, %v", r, err)
	}
	h, err := mem.History(ctx, tenant, conv, 0)
	if err != nil || len(h) != 2 || h[1].Content != r.Result {
		t.Fatalf("history %+v, %v", h, err)
	}
}
