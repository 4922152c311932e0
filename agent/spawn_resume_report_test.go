package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// The deciding run's ctx is cancelled while the resumed sub-agent runs
// (after the approved action ran): the action ran once, the request is
// gone, the history stays paired, and the coordinator's conversation
// records that the action ran.
func TestResumedSubAgentCancelledMidRun(t *testing.T) {
	email := &emailAgent{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &subScript{t: t, coord: coordinator("Email the team.")}
	s.worker = func(task string, req llm.Request) llmtest.Reply {
		if _, ok := toolResults(req)["e1"]; ok {
			cancel() // the user's client goes away while the sub-agent works
			return llmtest.Text("Worker: done")
		}
		return llmtest.Calls(llm.ToolCall{ID: "e1", Name: "send_email", Arguments: json.RawMessage(`{"to":"team@example.com","subject":"Plan"}`)})
	}
	o := subOrch(t, s, agent.Config{}, email)
	res, err := o.HandleMessage(context.Background(), msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	id := res.PendingApprovals[0].ID
	_, rerr := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve})
	if n := len(email.Sent()); n != 1 {
		t.Fatalf("sent %d (resolve err %v)", n, rerr)
	}
	if _, err := o.ResolveApproval(context.Background(), "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("a second decision: %v, want ErrNotFound", err)
	}
	if n := len(email.Sent()); n != 1 {
		t.Fatalf("sent %d", n)
	}
	h, err := o.History(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Fatalf("history breaks pairing after a cancel mid-resume: %v", err)
	}
	if got := spawnResumeResult(h, id); !strings.Contains(got, "Email sent to team@example.com") {
		t.Fatalf("resolve err %v; the coordinator's spawn result is %q: it does not record that the email was sent", rerr, got)
	}
}

// The resumed sub-agent stops without an answer after the approved action
// ran (it times out, or its model fails): the coordinator's conversation
// must still record that the action ran, or the coordinator, told only
// that the sub-agent failed, may start the same work again.
func TestResumedSubAgentFailingAfterTheActionReportsIt(t *testing.T) {
	for name, after := range map[string]llmtest.Reply{
		"timeout":     {Text: "late", Delay: time.Minute},
		"model fails": llmtest.Fail(errors.New("model refused: invalid request")),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			email := &emailAgent{}
			s := &subScript{t: t, coord: coordinator("Email the team.")}
			s.worker = func(task string, req llm.Request) llmtest.Reply {
				if _, ok := toolResults(req)["e1"]; ok {
					return after
				}
				return llmtest.Calls(llm.ToolCall{ID: "e1", Name: "send_email", Arguments: json.RawMessage(`{"to":"team@example.com","subject":"Plan"}`)})
			}
			o := subOrch(t, s, agent.Config{SubAgents: agent.SubAgentOptions{Timeout: 500 * time.Millisecond}}, email)
			res, err := o.HandleMessage(ctx, msg("Tell the team."))
			if err != nil {
				t.Fatal(err)
			}
			id := res.PendingApprovals[0].ID
			if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); err != nil {
				t.Fatal(err)
			}
			if n := len(email.Sent()); n != 1 {
				t.Fatalf("sent %d", n)
			}
			h, err := o.History(ctx, "u1", "c1")
			if err != nil {
				t.Fatal(err)
			}
			if got := spawnResumeResult(h, id); !strings.Contains(got, "Email sent to team@example.com") {
				t.Fatalf("the coordinator's spawn result is %q: it does not record that the approved email was sent", got)
			}
		})
	}
}

// The user's reply approves a sub-agent's action through Stream, and the
// consumer stops reading as soon as the action's result arrives (a closed
// connection): the action ran once, the request is gone, and the history
// stays paired and records that the action ran.
func TestStreamAbandonedMidResume(t *testing.T) {
	ctx := context.Background()
	email := &emailAgent{}
	s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
	o := subOrch(t, s, agent.Config{}, email)
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	id := res.PendingApprovals[0].ID
	for ev, err := range o.Stream(ctx, msg("yes")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == agent.EventToolResult && ev.ToolCall.Name == "send_email" {
			break
		}
	}
	if n := len(email.Sent()); n != 1 {
		t.Fatalf("sent %d", n)
	}
	if p := mustPending(t, o); len(p) != 0 {
		t.Fatalf("still pending %+v", p)
	}
	h, err := o.History(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Fatal(err)
	}
	if got := spawnResumeResult(h, id); !strings.Contains(got, "Email sent to team@example.com") {
		t.Fatalf("the coordinator's spawn result is %q: it does not record that the approved email was sent", got)
	}
}

// Nested: the inner sub-agent's model fails after the approved action ran,
// then the outer one's does too: the coordinator's spawn result still
// records that the action ran.
func TestNestedResumedSubAgentsFailingReportTheAction(t *testing.T) {
	ctx := context.Background()
	email := &emailAgent{}
	worker := func(task string, req llm.Request) llmtest.Reply {
		rs := toolResults(req)
		if task == "level one" {
			if _, ok := rs["deep"]; ok {
				return llmtest.Fail(errors.New("model refused: invalid request"))
			}
			return llmtest.Calls(spawnCall("deep", map[string]any{"task": "level two"}))
		}
		if _, ok := rs["e1"]; ok {
			return llmtest.Fail(errors.New("model refused: invalid request"))
		}
		return llmtest.Calls(llm.ToolCall{ID: "e1", Name: "send_email", Arguments: json.RawMessage(`{"to":"team@example.com","subject":"Plan"}`)})
	}
	s := &subScript{t: t, coord: coordinator("level one"), worker: worker}
	o := subOrch(t, s, agent.Config{}, email)
	res, err := o.HandleMessage(ctx, msg("Go."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("approvals %+v", res.PendingApprovals)
	}
	id := res.PendingApprovals[0].ID
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); err != nil {
		t.Fatal(err)
	}
	if n := len(email.Sent()); n != 1 {
		t.Fatalf("sent %d", n)
	}
	h, err := o.History(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got := spawnResumeResult(h, id); !strings.HasPrefix(got, "The approved action send_email ran: Email sent to team@example.com") {
		t.Fatalf("the coordinator's spawn result is %q", got)
	}
}

// A sub-agent's action the user cancelled, the sub-agent then failing:
// the coordinator's spawn result says the action did not run.
func TestResumedSubAgentFailingAfterACancelReportsIt(t *testing.T) {
	ctx := context.Background()
	email := &emailAgent{}
	s := &subScript{t: t, coord: coordinator("Email the team.")}
	s.worker = func(task string, req llm.Request) llmtest.Reply {
		if _, ok := toolResults(req)["e1"]; ok {
			return llmtest.Fail(errors.New("model refused: invalid request"))
		}
		return llmtest.Calls(llm.ToolCall{ID: "e1", Name: "send_email", Arguments: json.RawMessage(`{"to":"team@example.com","subject":"Plan"}`)})
	}
	o := subOrch(t, s, agent.Config{}, email)
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	id := res.PendingApprovals[0].ID
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Cancel}); err != nil {
		t.Fatal(err)
	}
	if n := len(email.Sent()); n != 0 {
		t.Fatalf("sent %d", n)
	}
	h, err := o.History(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got := spawnResumeResult(h, id); !strings.HasPrefix(got, "The action send_email the sub-agent waited for did not run: User cancelled") {
		t.Fatalf("the coordinator's spawn result is %q", got)
	}
}
