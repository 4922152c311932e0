// Package approval holds the confirmations an assistant asks for before it
// runs an action with consequences (sending mail, paying, booking), and
// turns a user's free-text reply into decisions about them.
//
// An Agent-Tool that needs confirmation raises a [Request]: a one-line
// ActionSummary, the Details the user should see, the [Request.Choices] the
// user has (approve, edit when AllowModification is set, cancel) and an
// ExpiresAt. All requests raised in one turn are shown to the user at once,
// and [Present] writes them as plain text:
//
//	pending := []approval.Request{{
//		ID:                "appr_1",
//		ActionSummary:     "Send an email to team@example.com",
//		Details:           map[string]any{"to": "team@example.com", "subject": "Weekly report"},
//		AllowModification: true,
//		ExpiresAt:         time.Date(2025, 6, 1, 15, 4, 5, 0, time.UTC),
//	}}
//	fmt.Print(approval.Present(pending))
//	// 1. Send an email to team@example.com
//	//    subject: Weekly report
//	//    to: team@example.com
//	//    Reply: approve, edit or cancel (expires 2025-06-01T15:04:05Z)
//
// The user's answer is a [Decision] per request: [Approve], [Edit] with the
// changed fields, or [Cancel]. A UI can build decisions directly (and check
// them with [Decision.Check]); a chat reply goes through [Resolve]:
//
//	res, err := approval.Resolve(ctx, client, "approve the email, cancel the flight", pending, approval.ResolveOptions{})
//	for _, d := range res.Decided { // in the order the user confirmed them
//		// run, edit or cancel d.ID according to d.Decision
//	}
//
// Resolve takes the cheap path first: when exactly one request is pending
// and the reply is a bare yes or no, [Quick] decides it with no model call.
// Quick is deliberately conservative, since a false yes runs an action with
// the user's money: "yes", "ok", "go ahead" and "👍" approve, "no", "cancel"
// and "👎" cancel, and a reply with anything more ("yes, but send it to me")
// goes to the model.
//
// Otherwise Resolve makes one model call that must call the
// [ResolveToolName] tool ([ResolveTool]), whose arguments
// [ParseDecisions] checks: unknown ids, repeated ids, actions a request does
// not allow and edits without changed fields are not applied and are listed
// in [Resolution.Ignored] instead. Requests the reply does not decide stay
// pending; a reply about something else decides nothing, and the caller
// handles it as an ordinary message.
//
// Model failures come back wrapped ("approval: resolve: ..."), so
// [github.com/valetkit/valet/llm.KindOf] still classifies them. In tests, a
// scripted model from [github.com/valetkit/valet/llm/llmtest] stands in for
// the real one; see the examples.
package approval
