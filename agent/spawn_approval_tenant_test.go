package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
)

// Another tenant cannot see, decide, cancel or pause a sub-agent's request
// by its id, nor decide it by replying "yes" in a conversation of the same
// name; nothing runs and the owner's request still waits.
func TestSubAgentApprovalIsTenantScoped(t *testing.T) {
	ctx := context.Background()
	email := &emailAgent{}
	s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
	o := subOrch(t, s, agent.Config{}, email)
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	id := res.PendingApprovals[0].ID
	if _, err := o.ResolveApproval(ctx, "u2", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("another tenant's decision: %v, want ErrNotFound", err)
	}
	if err := o.CancelAgent(ctx, "u2", id); err == nil {
		t.Fatal("another tenant cancelled the request")
	}
	if err := o.PauseAgent(ctx, "u2", id); err == nil {
		t.Fatal("another tenant paused the request")
	}
	if l, err := o.ListPendingApprovals(ctx, "u2"); err != nil || len(l) != 0 {
		t.Fatalf("another tenant lists %+v, %v", l, err)
	}
	if w, err := o.PendingAgents(ctx, "u2"); err != nil || len(w) != 0 {
		t.Fatalf("another tenant sees %+v, %v", w, err)
	}
	m := msg("yes")
	m.TenantID = "u2"
	if _, err := o.HandleMessage(ctx, m); err != nil {
		t.Fatal(err)
	}
	if n := len(email.Sent()); n != 0 {
		t.Fatalf("sent %d", n)
	}
	if l, err := o.ListPendingApprovals(ctx, "u1"); err != nil || len(l) != 1 || l[0].ID != id || l[0].ConversationID != "c1" {
		t.Fatalf("the owner's request: %+v, %v", l, err)
	}
}

// A paused sub-agent request is decided neither by a reply nor by
// ResolveApproval (ErrPaused); once resumed, it runs once.
func TestPausedSubAgentApprovalWaits(t *testing.T) {
	ctx := context.Background()
	email := &emailAgent{}
	s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
	o := subOrch(t, s, agent.Config{}, email)
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	id := res.PendingApprovals[0].ID
	if err := o.PauseAgent(ctx, "u1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := o.HandleMessage(ctx, msg("yes")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, agent.ErrPaused) {
		t.Fatalf("deciding a paused request: %v, want ErrPaused", err)
	}
	if n := len(email.Sent()); n != 0 {
		t.Fatalf("sent %d while paused", n)
	}
	if err := o.ResumeAgent(ctx, "u1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); err != nil {
		t.Fatal(err)
	}
	if n := len(email.Sent()); n != 1 {
		t.Fatalf("sent %d", n)
	}
}
