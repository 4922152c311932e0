package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// The phrasing call of replyWaiting (an aside call outside the loop) is
// neither checked against the budget nor capped: with 50 of 1000 tokens
// left it is sent with MaxTokens 0 (no cap) and the run consumes far more
// than its MaxTokens budget.
func TestBudgetPhrasingCallNotCapped(t *testing.T) {
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if len(req.Tools) == 0 { // phrasing
			return llmtest.Reply{Text: "Shall I send it?", Usage: llm.Usage{InputTokens: 900, OutputTokens: 4000}}
		}
		r := llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))
		r.Usage = llm.Usage{InputTokens: 900, OutputTokens: 50}
		return r
	})
	o := agentsOrch(t, s, agent.Config{}, &emailAgent{}, &noteAgent{})
	m := msg("mail the team")
	m.Budget = agent.Budget{MaxTokens: 1000}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	calls := s.Requests()
	if len(calls) > 1 {
		if mt := calls[1].MaxTokens; mt <= 0 || mt > 50 {
			t.Errorf("phrasing call sent with MaxTokens %d while only 50 of 1000 tokens remained (want no call, or a cap ≤ 50)", mt)
		}
	}
	if res.Consumed.Tokens > m.Budget.MaxTokens {
		t.Errorf("Consumed.Tokens %d > MaxTokens %d", res.Consumed.Tokens, m.Budget.MaxTokens)
	}
}

// ResolveApproval: the approval-resolution path (approve, then the loop)
// and, in a message, the resolve_approvals aside call are not gated. Here:
// a message answering a pending approval with a token budget too small
// for that call still sends the forced resolve_approvals call uncapped.
func TestBudgetResolveAsideCallNotCapped(t *testing.T) {
	rt := &router{
		loop: []llmtest.Reply{
			llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		},
		resolve: []llmtest.Reply{llmtest.ApproveAll()},
	}
	s := rt.script(t)
	o := agentsOrch(t, s, agent.Config{Loop: agent.LoopConfig{DirectAgentPrompts: true}}, &emailAgent{}, &noteAgent{})
	if _, err := o.HandleMessage(context.Background(), msg("mail the team")); err != nil {
		t.Fatal(err)
	}
	before := s.Calls()
	m := msg("yes send it")
	// The least budget CheckBudget accepts (one that fits no call at all
	// is refused before the run): it fits the system prompt and the tool
	// specs, not the history and the resolve call.
	least := leastWorkableTokens(t, o)
	m.Budget = agent.Budget{MaxTokens: least}
	_, _ = o.HandleMessage(context.Background(), m)
	reqs := s.Requests()[before:]
	for _, r := range reqs {
		if r.ToolChoice == approval.ResolveToolName && (r.MaxTokens == 0 || r.MaxTokens > least) {
			t.Errorf("resolve_approvals aside call sent with MaxTokens %d under a %d-token budget", r.MaxTokens, least)
		}
	}
}
