package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool"
)

// A depth-2 sub-agent parked; the orchestrator restarts with MaxDepth 1:
// the request is stale, nothing runs, no panic.
func TestNestedParkStaleAfterMaxDepthLowered(t *testing.T) {
	ctx := context.Background()
	shared := newPool(t, pool.MemoryConfig{})
	email := &emailAgent{}
	worker := func(task string, req llm.Request) llmtest.Reply {
		if task == "level one" {
			if r, ok := toolResults(req)["deep"]; ok {
				return llmtest.Text("One: " + firstLine(r.Content))
			}
			return llmtest.Calls(spawnCall("deep", map[string]any{"task": "level two"}))
		}
		return emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)(task, req)
	}
	s := &subScript{t: t, coord: coordinator("level one"), worker: worker}
	o := subOrch(t, s, agent.Config{Pool: shared}, email)
	res, err := o.HandleMessage(ctx, msg("Go."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("approvals %+v", res.PendingApprovals)
	}
	s2 := &subScript{t: t, coord: coordinator("level one"), worker: worker}
	shallow := subOrch(t, s2, agent.Config{Pool: shared, SubAgents: agent.SubAgentOptions{MaxDepth: 1}}, email)
	_, err = shallow.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
	if !errors.Is(err, agent.ErrStaleAgent) || len(email.Sent()) != 0 {
		t.Fatalf("err %v, sent %d; want ErrStaleAgent and nothing sent", err, len(email.Sent()))
	}
}
