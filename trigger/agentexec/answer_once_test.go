package agentexec_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// notes records the notifications of the "chat" channel.
type notes struct {
	mu  sync.Mutex
	got []trigger.Notification
}

func (n *notes) Notify(ctx context.Context, x trigger.Notification) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.got = append(n.got, x)
	return nil
}

func (n *notes) of(kind trigger.NotificationKind) []trigger.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []trigger.Notification
	for _, x := range n.got {
		if x.Kind == kind {
			out = append(out, x)
		}
	}
	return out
}

// approvalSetup is a mail task of conversation c1 whose run waits for the
// user's approval, its result notified on "chat".
func approvalSetup(t *testing.T, after string) (*agent.Orchestrator, *trigger.Engine, *notes, *mailer, trigger.Run) {
	t.Helper()
	return approvalSetupAt(t, after, clock.System{})
}

// approvalSetupAt is approvalSetup with the orchestrator's clock.
func approvalSetupAt(t *testing.T, after string, clk clock.Clock) (*agent.Orchestrator, *trigger.Engine, *notes, *mailer, trigger.Run) {
	t.Helper()
	mail := &mailer{}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email", mail); err != nil {
		t.Fatal(err)
	}
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)),
		llmtest.Text("Shall I send the email to team@example.com?"),
		llmtest.Text(after),
	)
	var link agentexec.Approvals
	o := newOrch(t, model, nil, agent.Config{Agents: reg, Clock: clk, Hooks: agent.Hooks{Decided: link.Decided}})
	n := &notes{}
	e, err := trigger.New(trigger.Config{
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: newExec(t, o, agentexec.Config{})},
		Notifiers: map[string]trigger.Notifier{"chat": n},
	})
	if err != nil {
		t.Fatal(err)
	}
	link.Attach(e)
	task := scheduleTask("mail", "Mail the team the plan.")
	task.Status, task.ConversationID = "", "c1"
	task.Trigger.Schedule = trigger.Schedule{At: time.Now().Add(time.Hour)}
	task.Output.Channel = "chat"
	if err := e.CreateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	r, err := e.RunNow(context.Background(), "u1", "mail")
	if err != nil || r.Status != trigger.RunWaiting || len(r.Approvals) != 1 {
		t.Fatalf("run %+v, %v", r, err)
	}
	if len(n.of(trigger.NotifyApproval)) != 1 {
		t.Fatalf("the user was not asked: %+v", n.got)
	}
	return o, e, n, mail, r
}

// The user approves a triggered run's action in the chat: the reply to
// their "yes" is the answer, and the notifier is not sent the same text
// again. The run still ends succeeded with that result.
func TestApprovalInChatAnswersOnce(t *testing.T) {
	o, e, n, mail, _ := approvalSetup(t, "Done: the email is sent.")
	ctx := context.Background()
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: "yes"})
	if err != nil || res.Response != "Done: the email is sent." || mail.sent.Load() != 1 {
		t.Fatalf("chat reply %+v, %v; %d sent", res, err, mail.sent.Load())
	}
	if len(res.Decided) != 1 || !res.Decided[0].InReply {
		t.Fatalf("Decided = %+v, want one, InReply", res.Decided)
	}
	for _, x := range n.of(trigger.NotifyResult) {
		if x.Text == res.Response {
			t.Fatalf("the answer %q reached the user twice: in the chat reply and by the notifier", x.Text)
		}
	}
	runs, err := e.Runs(ctx, "u1", "mail", 0)
	if err != nil || runs[0].Status != trigger.RunSucceeded || runs[0].Result != res.Response || !runs[0].ResultShown {
		t.Fatalf("run %+v, %v", runs[0], err)
	}
}

// Decided outside the chat (ResolveApproval, a UI's button), the notifier
// tells the user, once.
func TestApprovalFromUINotifiesOnce(t *testing.T) {
	o, e, n, mail, r := approvalSetup(t, "Done: the email is sent.")
	ctx := context.Background()
	res, err := o.ResolveApproval(ctx, "u1", r.Approvals[0].ID, approval.Decision{Action: approval.Approve})
	if err != nil || mail.sent.Load() != 1 || len(res.Decided) != 1 || res.Decided[0].InReply {
		t.Fatalf("ResolveApproval: %+v, %v; %d sent", res, err, mail.sent.Load())
	}
	got := n.of(trigger.NotifyResult)
	if len(got) != 1 || got[0].Text != res.Response {
		t.Fatalf("result notifications %+v, want one with %q", got, res.Response)
	}
	runs, err := e.Runs(ctx, "u1", "mail", 0)
	if err != nil || runs[0].Status != trigger.RunSucceeded || runs[0].Result != res.Response || runs[0].ResultShown {
		t.Fatalf("run %+v, %v", runs[0], err)
	}
}

// An approval that expired unanswered, found by a UI's ResolveApproval:
// nothing ran, and the notifier tells the user so, once.
func TestExpiredApprovalNotifiesOnce(t *testing.T) {
	clk := clocktest.New(time.Now())
	o, e, n, mail, r := approvalSetupAt(t, "unused", clk)
	clk.Advance(agent.DefaultApprovalTimeout + time.Minute) // expired, still kept by the pool
	ctx := context.Background()
	if _, err := o.ResolveApproval(ctx, "u1", r.Approvals[0].ID, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrExpired) {
		t.Fatalf("ResolveApproval of an expired approval: %v", err)
	}
	runs, err := e.Runs(ctx, "u1", "mail", 0)
	if err != nil || runs[0].Status != trigger.RunExpired || mail.sent.Load() != 0 {
		t.Fatalf("run %+v, %v; %d sent", runs[0], err, mail.sent.Load())
	}
	got := n.of(trigger.NotifyExpired)
	if len(got) != 1 || got[0].RunID != r.ID || got[0].Text == "" {
		t.Fatalf("expiry notifications %+v, want one for run %s", got, r.ID)
	}
	if res := n.of(trigger.NotifyResult); len(res) != 0 {
		t.Fatalf("result notifications for an expired run: %+v", res)
	}
}
