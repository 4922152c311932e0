package agentexec_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/clock"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// A recurring task's runs share the task's conversation. Its second run
// reports, as its own, every approval the conversation still waits for
// (res.PendingApprovals lists them all), including the first run's. The
// user's approval of the first run's email is then booked on the second
// run (ApprovalSettled takes the newest waiting run holding that id):
// the first run keeps waiting (and the sweeper later marks it EXPIRED,
// "nothing ran", though the email was sent).
func TestSecondRunClaimsFirstRunsApproval(t *testing.T) {
	mail := &mailer{}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email", mail); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)),
		llmtest.Text("Shall I send the email to team@example.com?"),
		llmtest.Calls(llmtest.Call("send_email", `{"to":"boss@example.com"}`)),
		llmtest.Text("Shall I send the email to boss@example.com?"),
		llmtest.Text("Done: the email is sent."),
		llmtest.Text("Done: the email is sent."),
	)
	var link agentexec.Approvals
	o := newOrch(t, model, nil, agent.Config{Agents: reg, Clock: clock.System{}, Hooks: agent.Hooks{Decided: link.Decided}})
	e, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	link.Attach(e)
	ctx := context.Background()
	task := scheduleTask("mail", "Mail the team the plan.")
	task.Status = ""
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	r1, err := e.RunNow(ctx, "u1", "mail")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond)
	r2, err := e.RunNow(ctx, "u1", "mail")
	if err != nil {
		t.Fatal(err)
	}
	if r1.Status != trigger.RunWaiting || len(r1.Approvals) != 1 {
		t.Fatalf("run 1 %+v", r1)
	}
	a1 := r1.Approvals[0].ID
	if _, err := o.ResolveApproval(ctx, "u1", a1, approval.Decision{Action: approval.Approve}); err != nil {
		t.Fatal(err)
	}
	runs, err := e.Runs(ctx, "u1", "mail", 0)
	if err != nil {
		t.Fatal(err)
	}
	var got1 trigger.Run
	for _, r := range runs {
		if r.ID == r1.ID {
			got1 = r
		}
	}
	if len(r2.Approvals) != 1 || got1.Status != trigger.RunSucceeded {
		t.Fatalf("run 2 reports approvals %+v (run 1's is %s);\nafter approving run 1's email (%d sent): run 1 is %s %+v",
			r2.Approvals, a1, mail.sent.Load(), got1.Status, got1.Approvals)
	}
}

// A triggered message that lands in a conversation with a pending
// approval is read as the user's reply to it: the orchestrator hands the
// trigger's text (the task's instruction, or for an event task the
// untrusted event data) to approval.Resolve as "the user's latest reply".
// Whatever the model then decides runs as the user's decision (Decided
// reports it, the engine books it as approved) without the user ever
// answering.
func TestTriggerMessageDecidesPendingApproval(t *testing.T) {
	mail := &mailer{}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email", mail); err != nil {
		t.Fatal(err)
	}
	var pendingID string
	var resolveReply string
	n := 0
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		for _, tl := range req.Tools {
			if tl.Name == approval.ResolveToolName {
				resolveReply = req.Messages[len(req.Messages)-1].Content
				return llmtest.Calls(llmtest.Call(approval.ResolveToolName,
					`{"decisions":[{"id":"`+pendingID+`","action":"approve"}]}`))
			}
		}
		n++
		if n == 1 {
			return llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`))
		}
		return llmtest.Text("ok")
	})
	var link agentexec.Approvals
	o := newOrch(t, model, nil, agent.Config{Agents: reg, Clock: clock.System{}, Hooks: agent.Hooks{Decided: link.Decided}})
	e, err := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	link.Attach(e)
	ctx := context.Background()
	task := scheduleTask("mail", "Mail the team the plan.")
	task.Status = ""
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	r1, err := e.RunNow(ctx, "u1", "mail")
	if err != nil || len(r1.Approvals) != 1 {
		t.Fatalf("run 1 %+v %v", r1, err)
	}
	pendingID = r1.Approvals[0].ID
	time.Sleep(2 * time.Millisecond)
	if _, err := e.RunNow(ctx, "u1", "mail"); err != nil { // the next firing of the task
		t.Fatal(err)
	}
	if resolveReply != "" || mail.sent.Load() != 0 {
		t.Fatalf("the trigger's own message was given to approval.Resolve as the user's reply (%q); emails sent without the user answering: %d",
			resolveReply, mail.sent.Load())
	}
}
