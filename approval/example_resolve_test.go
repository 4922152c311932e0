package approval_test

import (
	"context"
	"fmt"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
)

// The first thing a bot builds here is a Request: what an Agent-Tool's
// Approval method returns for an action with consequences. Present shows
// the pending requests to the user; Resolve turns the user's reply into
// decisions, with one model call (a scripted one here) unless a bare yes
// or no settles a single request.
func Example() {
	pending := []approval.Request{
		{ID: "appr_1", AgentName: "send_email", ActionSummary: "Send the report to team@example.com"},
		{ID: "appr_2", AgentName: "pay_invoice", ActionSummary: "Pay invoice 42 (€120)"},
	}
	fmt.Print(approval.Present(pending))

	model := llmtest.NewScript(llmtest.Decide(llmtest.Approve(0), llmtest.Cancel(1).Because("already paid")))
	res, err := approval.Resolve(context.Background(), model, "send it, but I paid that invoice already", pending, approval.ResolveOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range res.Decided {
		fmt.Printf("%s %s reason=%q\n", d.ID, d.Decision.Action, d.Decision.Reason)
	}
	// Output:
	// 1. Send the report to team@example.com
	//    Reply: approve or cancel
	//
	// 2. Pay invoice 42 (€120)
	//    Reply: approve or cancel
	// appr_1 approve reason=""
	// appr_2 cancel reason="already paid"
}
