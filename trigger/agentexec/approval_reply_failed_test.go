package agentexec_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/clock"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// The user approves a triggered run's action in the chat and the action
// runs, but the reply to their "yes" fails (the model is down): the chat
// showed them nothing. The run must not record, nor the notifier send,
// the text the run asked its question with ("Shall I send …?") as the
// outcome of the run that has just sent the email: the user would be asked
// again for what is done, and told nothing of it.
func TestApprovalInChatWhoseReplyFailedIsNotAnsweredWithTheQuestion(t *testing.T) {
	const question = "Shall I send the email to team@example.com?"
	down := errors.New("model unavailable")
	o, e, n, mail := waitingMailRun(t, question, llmtest.Fail(down), llmtest.Fail(down), llmtest.Fail(down))
	ctx := context.Background()
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: "yes"})
	if err == nil || mail.sent.Load() != 1 {
		t.Fatalf("chat reply %+v, %v; %d sent: want the action run and the reply failed", res, err, mail.sent.Load())
	}
	if res.Response != "" {
		t.Fatalf("a failed reply has Response %q", res.Response)
	}
	runs, err := e.Runs(ctx, "u1", "mail", 0)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Status == trigger.RunSucceeded && strings.HasPrefix(runs[0].Result, question) {
		t.Errorf("the run that sent the email is recorded succeeded with the question it asked as its result: %+v", runs[0])
	}
	for _, x := range n.of(trigger.NotifyResult) {
		if strings.Contains(x.Text, "Shall I send") {
			t.Errorf("after the user approved and the email was sent, the notifier asked again: %q", x.Text)
		}
	}
	if got := n.of(trigger.NotifyResult); len(got) != 1 || !strings.Contains(got[0].Text, "approved") {
		t.Errorf("result notifications %+v, want one telling the user what they approved", got)
	}
}

// waitingMailRun is a one-time mail task of conversation c1, notified on
// "chat", whose run waits for the approval it asked with question; after
// are the model's replies once the user decides.
func waitingMailRun(t *testing.T, question string, after ...llmtest.Reply) (*agent.Orchestrator, *trigger.Engine, *notes, *mailer) {
	t.Helper()
	mail := &mailer{}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email", mail); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewScript(append([]llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)),
		llmtest.Text(question),
	}, after...)...)
	var link agentexec.Approvals
	o := newOrch(t, model, nil, agent.Config{Agents: reg, Clock: clock.System{}, Hooks: agent.Hooks{Decided: link.Decided}})
	n := &notes{}
	e, err := trigger.New(trigger.Config{
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})},
		Notifiers: map[string]trigger.Notifier{"chat": n},
	})
	if err != nil {
		t.Fatal(err)
	}
	link.Attach(e)
	ctx := context.Background()
	task := scheduleTask("mail", "Mail the team the plan.")
	task.Status, task.ConversationID = "", "c1"
	task.Trigger.Schedule = trigger.Schedule{At: time.Now().Add(time.Hour)}
	task.Output.Channel = "chat"
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if r, err := e.RunNow(ctx, "u1", "mail"); err != nil || r.Status != trigger.RunWaiting || !strings.HasPrefix(r.Result, question) {
		t.Fatalf("run %+v, %v", r, err)
	}
	return o, e, n, mail
}

// The user approves in a streamed chat and leaves (closes the app) while
// the answer is being written: the stream never showed it, so the
// notifier tells them what they decided, once, not the question again.
func TestApprovalInAStreamLeftEarlyIsNotified(t *testing.T) {
	const question = "Shall I send the email to team@example.com?"
	o, e, n, mail := waitingMailRun(t, question, llmtest.Text("Done: the email is sent to the whole team."))
	for ev, err := range o.Stream(context.Background(), agent.Message{TenantID: "u1", ConversationID: "c1", Text: "yes"}) {
		if err != nil || ev.Type == agent.EventMessageChunk {
			break // the user is gone
		}
	}
	if mail.sent.Load() != 1 {
		t.Fatalf("%d sent, want the approved email sent", mail.sent.Load())
	}
	runs, err := e.Runs(context.Background(), "u1", "mail", 0)
	if err != nil || runs[0].Status != trigger.RunSucceeded {
		t.Errorf("the run whose email was sent is %+v, %v; want succeeded", runs[0], err)
	}
	got := n.of(trigger.NotifyResult)
	if len(got) != 1 || strings.Contains(got[0].Text, "Shall I send") {
		t.Fatalf("result notifications %+v, want one telling the user the outcome", got)
	}
}
