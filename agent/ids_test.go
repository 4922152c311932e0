package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// The orchestrator takes the IDs memory takes (agent.MaxIDLen =
// memory.MaxIDLen): a 256-byte tenant, conversation or task ID is refused
// with ErrInvalidID where it enters, before any model call, instead of a
// run that answers and then fails to save its turn.
func TestIDLimit(t *testing.T) {
	if agent.MaxIDLen != memory.MaxIDLen {
		t.Fatalf("agent.MaxIDLen = %d, memory.MaxIDLen = %d", agent.MaxIDLen, memory.MaxIDLen)
	}
	model := llmtest.NewScript()
	o := newOrch(t, model, agent.Config{})
	ctx := context.Background()
	long := strings.Repeat("x", agent.MaxIDLen+1)
	stream := func(m agent.Message) error {
		var last error
		for _, err := range o.Stream(ctx, m) {
			last = err
		}
		return last
	}
	calls := map[string]error{}
	for name, m := range map[string]agent.Message{
		"tenant":       {TenantID: long, Text: "hi"},
		"conversation": {TenantID: "u1", ConversationID: long, Text: "hi"},
		"task":         {TenantID: "u1", Text: "hi", Source: agent.SourceTrigger, TaskID: long},
		"bad UTF-8":    {TenantID: "u\xff", Text: "hi"},
		"NUL":          {TenantID: "u1", ConversationID: "c\x00", Text: "hi"},
	} {
		_, err := o.HandleMessage(ctx, m)
		calls["HandleMessage "+name] = err
		calls["Stream "+name] = stream(m)
	}
	_, calls["ResolveApproval"] = o.ResolveApproval(ctx, long, "a1", approval.Decision{Action: approval.Approve})
	_, calls["ListPendingApprovals"] = o.ListPendingApprovals(ctx, long)
	_, calls["PendingAgents"] = o.PendingAgents(ctx, long)
	calls["PauseAgent"] = o.PauseAgent(ctx, long, "a1")
	calls["ResumeAgent"] = o.ResumeAgent(ctx, long, "a1")
	calls["CancelAgent"] = o.CancelAgent(ctx, long, "a1")
	_, calls["History tenant"] = o.History(ctx, long, "c1")
	_, calls["History conversation"] = o.History(ctx, "u1", long)
	calls["Forget tenant"] = o.Forget(ctx, long, "c1")
	calls["Forget conversation"] = o.Forget(ctx, "u1", long)
	for name, err := range calls {
		if !errors.Is(err, agent.ErrInvalidID) {
			t.Errorf("%s: %v, want ErrInvalidID", name, err)
		}
	}
	if model.Calls() != 0 {
		t.Fatalf("%d model calls", model.Calls())
	}
	// An empty tenant is still ErrNoTenant.
	if _, err := o.HandleMessage(ctx, agent.Message{Text: "hi"}); !errors.Is(err, agent.ErrNoTenant) {
		t.Fatalf("no tenant: %v", err)
	}
}

// IDs of MaxIDLen bytes work end to end: the turn is answered, saved and
// read back, and Forget erases it.
func TestLongestIDs(t *testing.T) {
	model := llmtest.NewScript(llmtest.Text("Hello."))
	o := newOrch(t, model, agent.Config{})
	ctx := context.Background()
	tenant, conv := strings.Repeat("t", agent.MaxIDLen), strings.Repeat("c", agent.MaxIDLen)
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: tenant, ConversationID: conv, Text: "hi",
		Source: agent.SourceTrigger, TaskID: strings.Repeat("k", agent.MaxIDLen)})
	if err != nil || res.Response != "Hello." {
		t.Fatalf("HandleMessage: %+v, %v", res, err)
	}
	h, err := o.History(ctx, tenant, conv)
	if err != nil || len(h) != 2 {
		t.Fatalf("History: %d messages, %v", len(h), err)
	}
	if err := o.Forget(ctx, tenant, conv); err != nil {
		t.Fatal(err)
	}
	if h, err := o.History(ctx, tenant, conv); err != nil || len(h) != 0 {
		t.Fatalf("History after Forget: %d messages, %v", len(h), err)
	}
}
