package agent_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A spawn's budget_share holds across the park: a sub-agent given 5 tool
// calls that used 3 (two lookups and the action that parked it) may use
// at most what is left once resumed, however long it keeps calling tools.
func TestResumedSubAgentKeepsItsBudgetShare(t *testing.T) {
	ctx := context.Background()
	var echoes atomic.Int32
	echo := tool.New("echo", "Echo", func(_ context.Context, in EchoIn) (string, error) {
		echoes.Add(1)
		return "echo " + in.Q, nil
	})
	email := &emailAgent{}
	s := &subScript{t: t}
	s.coord = func(req llm.Request) llmtest.Reply {
		if m, ok := resumedResult(req); ok {
			return llmtest.Text("Done: " + firstLine(m.Content))
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("Waiting.")
		}
		// 21 tool calls; the spawn is one; a quarter of the 20 left is 5.
		return llmtest.Calls(spawnCall("sp1", map[string]any{"task": "Look up, then email.", "budget_share": 0.25}))
	}
	s.worker = func(task string, req llm.Request) llmtest.Reply {
		n := 0
		for _, m := range req.Messages {
			if m.Role == llm.RoleTool && m.Name == "echo" {
				n++
			}
		}
		if hasResultNamed(req, "send_email") { // resumed: keep calling tools
			return llmtest.Calls(llm.ToolCall{ID: "x" + itoa(n), Name: "echo", Arguments: json.RawMessage(`{"q":"more"}`)})
		}
		if n < 2 {
			return llmtest.Calls(llm.ToolCall{ID: "l" + itoa(n), Name: "echo", Arguments: json.RawMessage(`{"q":"look"}`)})
		}
		return llmtest.Calls(llm.ToolCall{ID: "e1", Name: "send_email", Arguments: json.RawMessage(`{"to":"team@example.com","subject":"Plan"}`)})
	}
	o := subOrch(t, s, agent.Config{Tools: []tool.Tool{echo}}, email)
	m := msg("Go.")
	m.Budget = agent.Budget{MaxToolCalls: 21}
	res, err := o.HandleMessage(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 || echoes.Load() != 2 {
		t.Fatalf("approvals %+v, echoes %d", res.PendingApprovals, echoes.Load())
	}
	if _, err := o.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve}); err != nil {
		t.Fatal(err)
	}
	if n := len(email.Sent()); n != 1 {
		t.Fatalf("sent %d", n)
	}
	if after := echoes.Load() - 2; after > 2 {
		t.Fatalf("the resumed sub-agent ran %d more tool calls; its share left 2 (5 - 3 used before it parked)", after)
	}
}
