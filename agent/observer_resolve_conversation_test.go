package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
)

// A run started by ResolveApproval belongs to the approval's conversation:
// every one of its steps, run_start included, carries that conversation,
// so an observer grouping steps by conversation sees the whole run in one.
func TestObserverResolveApprovalStepsCarryTheConversation(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("send_email", `{"to":"bob@example.com","subject":"Hi"}`)),
		llmtest.Text("Shall I send it?"),
		llmtest.Text("Sent."),
	)
	var log stepLog
	o := agentsOrch(t, s, agent.Config{Observer: &log}, &emailAgent{}, &noteAgent{})
	res, err := o.HandleMessage(context.Background(), msg("Mail Bob"))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	res2, err := o.ResolveApproval(context.Background(), "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, st := range log.all() {
		if st.RunID != res2.RunID {
			continue
		}
		n++
		if st.ConversationID != "c1" {
			t.Errorf("step %d (%s) of the ResolveApproval run has conversation %q, want c1 (the approval's)", st.Seq, st.Kind, st.ConversationID)
		}
	}
	if n == 0 {
		t.Fatal("no step of the ResolveApproval run")
	}
}
