package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
)

// An approved Agent-Tool run by ResolveApproval (resume → runAgent) is not
// counted in Result.Consumed.ToolCalls (only runTools counts), so
// Consumed under-reports and MaxToolCalls never sees resumed actions.
func TestToolCallsResumedAgentNotCounted(t *testing.T) {
	email := &emailAgent{}
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Email sent."),
	)
	o := agentsOrch(t, s, agent.Config{Loop: agent.LoopConfig{DirectAgentPrompts: true}}, email, &noteAgent{})
	res, err := o.HandleMessage(context.Background(), msg("mail the team"))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	res, err = o.ResolveApproval(context.Background(), "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
	if err != nil || len(email.Sent()) != 1 {
		t.Fatalf("resolve: %+v, %v; sent %d", res, err, len(email.Sent()))
	}
	if res.Consumed.ToolCalls != 1 {
		t.Errorf("Consumed.ToolCalls = %d after ResolveApproval ran the approved send_email; want 1", res.Consumed.ToolCalls)
	}
}
