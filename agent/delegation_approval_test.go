package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A sub-agent resumed by the user's decision has its answer stored too,
// before the coordinator reads it, and the resumed spawn's result names it.
func TestResumedSubAgentResultStored(t *testing.T) {
	ctx := context.Background()
	eng := newEngine(t)
	s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
	o := subOrch(t, s, agent.Config{SubAgents: agent.SubAgentOptions{Engine: eng}}, &emailAgent{})
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("status %s, want one approval", res.Status)
	}
	req := res.PendingApprovals[0]
	if _, err := o.ResolveApproval(ctx, "u1", req.ID, approval.Decision{Action: approval.Approve, Fingerprint: req.Fingerprint}); err != nil {
		t.Fatal(err)
	}
	h, err := o.History(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range h {
		if m.Role == llm.RoleTool && m.ToolCallID == "resume_"+req.ID {
			ids = delegate.Refs(m.Content)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("the resumed spawn's result names %q, want one stored result", ids)
	}
	got, err := eng.Result(ctx, "u1", ids[0])
	if err != nil || got.Text != "Worker: Email sent to team@example.com" || got.Status != delegate.ResultCompleted {
		t.Fatalf("stored %+v, %v", got, err)
	}
}

// A background task's specialist that calls an Agent-Tool needing approval
// is not parked: nothing waits in the pool, the action is not taken, and
// the task fails saying so; its dependant is blocked.
func TestBackgroundTaskCannotWaitForApproval(t *testing.T) {
	ctx := context.Background()
	email := &emailAgent{}
	eng := fastEngine(t, 1)
	got := make(chan *agent.Result, 1)
	s := &graphScript{tasks: []map[string]any{
		{"id": "mail", "task": "Email the team."},
		{"id": "after", "task": "Report.", "depends_on": []string{"mail"}},
	}, worker: func(string) llmtest.Reply { return llmtest.Reply{Text: "reported"} }}
	mailer := emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if len(req.Tools) == 0 {
			return llmtest.Text("Please confirm.")
		}
		if isWorker(req) && firstUser(req) == "Email the team." {
			return mailer(firstUser(req), req)
		}
		return s.reply(req)
	})
	o := agentsOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: eng,
		OnBackground: func(_ context.Context, res *agent.Result) { got <- res }})}, email, &noteAgent{})
	runEngine(t, eng, o)
	if _, err := o.HandleMessage(ctx, msg("Email the team in the background.")); err != nil {
		t.Fatal(err)
	}
	awaitResult(t, got)
	_, delivery, _ := s.snapshot()
	if len(delivery) != 1 || !strings.Contains(delivery[0], "- mail: failed") || !strings.Contains(delivery[0], "- after: blocked") {
		t.Fatalf("delivery %q", delivery)
	}
	r, err := eng.Result(ctx, "u1", between(delivery[0], "result [agent_result:", "]"))
	if err != nil || !strings.Contains(r.Text, "needs the user's approval for send_email") || r.Status != delegate.ResultFailed {
		t.Fatalf("the task's result %+v, %v: want it failed, saying it needs approval", r, err)
	}
	if n := len(email.Sent()); n != 0 {
		t.Fatalf("the email was sent %d times", n)
	}
	if p, err := o.ListPendingApprovals(ctx, "u1"); err != nil || len(p) != 0 {
		t.Fatalf("pending approvals %+v, %v: want none", p, err)
	}
}
