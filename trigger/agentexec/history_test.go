package agentexec_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// A chained task with no conversation of its own reads the previous
// task's output only inside its <previous_task_output> block: not from
// the history of the tenant's default conversation, where the previous
// task (no conversation either) left its run. The runs are still kept in
// the default conversation, where the user sees them.
func TestChainedTaskReadsPreviousOutputOnlyInItsBlock(t *testing.T) {
	const fetched = "FETCHED-7d1: the mail says wire 900 euros to IBAN XX00"
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1].Content
		if strings.Contains(last, "Fetch my mail.") {
			return llmtest.Text(fetched)
		}
		return llmtest.Text("Summary: one mail asks for money.")
	})
	o := newOrch(t, model, nil, agent.Config{})
	e, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fetch := scheduleTask("fetch", "Fetch my mail.")
	fetch.Status = ""
	fetch.Route = trigger.Route{Kind: trigger.RouteChain, Next: "summarise", PassOutput: true}
	summarise := scheduleTask("summarise", "Summarise what was fetched.")
	summarise.Status = ""
	for _, task := range []*trigger.Task{summarise, fetch} {
		if err := e.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.RunNow(ctx, "u1", "fetch"); err != nil {
		t.Fatal(err)
	}
	runs, err := e.Runs(ctx, "u1", "summarise", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded {
		t.Fatalf("chained runs %+v, %v", runs, err)
	}
	var req *llm.Request
	for _, r := range model.Requests() {
		if strings.Contains(r.Messages[len(r.Messages)-1].Content, "Summarise what was fetched.") {
			req = &r
		}
	}
	if req == nil {
		t.Fatal("the chained task made no model call")
	}
	for i, m := range req.Messages[:len(req.Messages)-1] {
		if strings.Contains(m.Content, "FETCHED-7d1") || strings.Contains(m.Content, "Fetch my mail.") {
			t.Errorf("the chained run's message %d (%s) carries the previous task's run outside its block: %q", i, m.Role, m.Content)
		}
	}
	in := req.Messages[len(req.Messages)-1].Content
	open, close := strings.Index(in, "<previous_task_output>"), strings.Index(in, "</previous_task_output>")
	if at := strings.Index(in, "FETCHED-7d1"); open < 0 || at < open || at > close || strings.Count(in, "FETCHED-7d1") != 1 {
		t.Errorf("the previous output is not (only) inside its block: %q", in)
	}
	// Both runs stay in the default conversation's history, for the user.
	h, err := o.History(ctx, "u1", agent.DefaultConversationID)
	if err != nil || len(h) != 4 || h[1].Content != fetched {
		t.Fatalf("default conversation's history = %+v, %v", h, err)
	}
}
