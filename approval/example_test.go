package approval_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
)

func ExampleQuick() {
	for _, reply := range []string{"Yes!", "go ahead", "👍", "No thanks.", "yes, but send it to me instead", "ok?"} {
		action, ok := approval.Quick(reply)
		if !ok {
			fmt.Printf("%q → ask the model\n", reply)
			continue
		}
		fmt.Printf("%q → %s\n", reply, action)
	}
	// Output:
	// "Yes!" → approve
	// "go ahead" → approve
	// "👍" → approve
	// "No thanks." → cancel
	// "yes, but send it to me instead" → ask the model
	// "ok?" → ask the model
}

func ExamplePresent() {
	pending := []approval.Request{
		{
			ID:                "appr_1",
			AgentName:         "send_email",
			ActionSummary:     "Send an email to team@example.com",
			Details:           map[string]any{"to": "team@example.com", "subject": "Weekly report"},
			AllowModification: true,
			ExpiresAt:         time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC),
		},
		{
			ID:            "appr_2",
			AgentName:     "pay_invoice",
			ActionSummary: "Pay invoice 42",
			Details:       map[string]any{"amount": 120.5, "currency": "EUR"},
		},
	}
	fmt.Print(approval.Present(pending))
	// Output:
	// 1. Send an email to team@example.com
	//    subject: Weekly report
	//    to: team@example.com
	//    Reply: approve, edit or cancel (expires 2025-06-01T15:04:05Z)
	//
	// 2. Pay invoice 42
	//    amount: 120.5
	//    currency: EUR
	//    Reply: approve or cancel
}

func ExampleResolve() {
	pending := []approval.Request{
		{ID: "appr_1", AgentName: "send_email", ActionSummary: "Send an email to team@example.com", AllowModification: true},
		{ID: "appr_2", AgentName: "pay_invoice", ActionSummary: "Pay invoice 42"},
	}
	// The scripted model answers the way a real one would: it calls the
	// forced resolve_approvals tool.
	model := llmtest.NewScript(llmtest.Calls(llmtest.Call(approval.ResolveToolName, `{"decisions":[
		{"id": "appr_2", "action": "cancel", "reason": "already paid"},
		{"id": "appr_1", "action": "edit", "fields": {"to": "me@example.com"}}]}`)))

	res, err := approval.Resolve(context.Background(), model,
		"don't pay, I already did. And send the mail to me instead", pending,
		approval.ResolveOptions{Editable: map[string]json.RawMessage{
			"appr_1": json.RawMessage(`{"type":"object","properties":{"to":{"type":"string","format":"email"}}}`),
		}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range res.Decided {
		fmt.Printf("%s %s fields=%s reason=%q\n", d.ID, d.Decision.Action, d.Decision.Fields, d.Decision.Reason)
	}
	fmt.Println("model calls:", model.Calls(), "quick:", res.Quick)

	// With one request pending, a bare yes needs no model at all.
	res, _ = approval.Resolve(context.Background(), model, "yes!", pending[:1], approval.ResolveOptions{})
	fmt.Println(res.Decided[0].ID, res.Decided[0].Decision.Action, "model calls:", model.Calls(), "quick:", res.Quick)
	// Output:
	// appr_2 cancel fields= reason="already paid"
	// appr_1 edit fields={"to":"me@example.com"} reason=""
	// model calls: 1 quick: false
	// appr_1 approve model calls: 1 quick: true
}
