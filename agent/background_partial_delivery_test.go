package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A task whose sub-agent was stopped by its budget completes with a
// partial result; the delivery must say so for every such task, also for
// one whose result is not shown (past the first eight), so that the
// coordinator does not tell the user the work is complete when a part of
// it was cut short.
func TestBackgroundDeliveryMarksPartialResults(t *testing.T) {
	eng := newEngine(t)
	var delivery string
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if u := lastUser(req); strings.HasPrefix(u.Content, "[Background Tasks]") {
			delivery = u.Content
		}
		return llmtest.Reply{Text: "Noted."}
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	var specs []delegate.TaskSpec
	for i := range 10 {
		specs = append(specs, delegate.TaskSpec{ID: fmt.Sprintf("t%d", i), Task: "Compare one hotel."})
	}
	g, err := delegate.NewGraph("u1", "c1", specs)
	if err != nil {
		t.Fatal(err)
	}
	g.Status = delegate.GraphCompleted
	for i := range g.Tasks {
		task := &g.Tasks[i]
		status := delegate.ResultCompleted
		if i == 9 {
			status = delegate.ResultPartial // stopped by its budget
		}
		task.Status, task.ResultID = delegate.TaskCompleted, delegate.ResultID(g.ID, task.ID)
		if err := eng.PutResult(context.Background(), delegate.Result{ID: task.ResultID, TenantID: "u1", ConversationID: "c1",
			GraphID: g.ID, TaskID: task.ID, Text: "hotel " + task.ID, Status: status}); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.TaskExecutor().Deliver(context.Background(), &g); err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(delivery, "\n") {
		if strings.HasPrefix(l, "- t9") {
			line = l
		}
	}
	if !strings.Contains(line, "partial") {
		t.Fatalf("the delivery lists the task stopped by its budget as %q, want it marked partial:\n%s", line, delivery)
	}
}
