package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// A call parked as high risk is approved after the operator tightened
// the policy (a restart with a RiskPolicy that now classifies it
// critical, or a tool now declared critical): an approval is consent to
// a high-risk call, not a way round a denial, so the call does not run.
func TestApprovedCallIsDeniedWhenThePolicyNowSaysCritical(t *testing.T) {
	ctx := context.Background()
	store, err := pool.NewMemory(pool.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sh := &shell{}
	m := &riskModel{first: []llm.ToolCall{shellCall("c1", "rm notes.txt")}}
	first := riskOrch(t, m.client(t), agent.Config{Pool: store, Memory: mem}, sh)
	res, err := first.HandleMessage(ctx, msg("Delete my notes."))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res %+v, %v", res, err)
	}
	strict := func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error) { return tool.RiskCritical, nil }
	second := riskOrch(t, m.client(t), agent.Config{Pool: store, Memory: mem, Loop: agent.LoopConfig{RiskPolicy: strict}}, sh)
	_, err = second.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
	if got := sh.commands(); len(got) != 0 {
		t.Fatalf("ran %q (err %v) although the policy in force now denies the call", got, err)
	}
	denied := false
	for _, m := range history(t, second, "u1", "c1") {
		if m.Role == llm.RoleTool && strings.Contains(m.Content, "denied by the risk policy") {
			denied = true
		}
	}
	if !denied {
		t.Fatal("the history has no result saying the approved call was denied by the risk policy")
	}
	if _, err := second.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve}); err == nil {
		t.Fatal("a second approval of the denied call found it still waiting")
	}
}

// A policy that now says high (or lower) lets the approved call run: the
// re-check at decision time denies only what is critical now.
func TestApprovedCallRunsWhenThePolicyStillAllowsIt(t *testing.T) {
	ctx := context.Background()
	store, err := pool.NewMemory(pool.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sh := &shell{}
	m := &riskModel{first: []llm.ToolCall{shellCall("c1", "rm notes.txt")}}
	first := riskOrch(t, m.client(t), agent.Config{Pool: store, Memory: mem}, sh)
	res, err := first.HandleMessage(ctx, msg("Delete my notes."))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res %+v, %v", res, err)
	}
	medium := func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error) { return tool.RiskMedium, nil }
	second := riskOrch(t, m.client(t), agent.Config{Pool: store, Memory: mem, Loop: agent.LoopConfig{RiskPolicy: medium}}, sh)
	if _, err := second.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve}); err != nil {
		t.Fatal(err)
	}
	if got := sh.commands(); len(got) != 1 {
		t.Fatalf("ran %q, want the approved call once", got)
	}
}
