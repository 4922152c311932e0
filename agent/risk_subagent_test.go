package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// shellWorker calls the shell with cmd once (call k1), then with cmd2
// when set (k2, in the same turn), then answers with the first result.
func shellWorker(cmds ...string) func(string, llm.Request) llmtest.Reply {
	return func(task string, req llm.Request) llmtest.Reply {
		if r, ok := toolResults(req)["k1"]; ok {
			return llmtest.Text("Worker: " + r.Content)
		}
		var calls []llm.ToolCall
		for i, c := range cmds {
			calls = append(calls, shellCall("k"+string(rune('1'+i)), c))
		}
		return llmtest.Calls(calls...)
	}
}

// A high-risk call inside a sub-agent reaches the user the way a
// sub-agent's approval does: the coordinator waits; approving it runs the
// call once inside the sub-agent, which resumes with its result, and the
// sub-agent's answer comes back to the coordinator. A second high-risk
// call of the same turn does not wait: it is told to call again.
func TestRiskyCallInsideSubAgent(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	s := &subScript{t: t, coord: coordinator("Clean the tmp dir."), worker: shellWorker("rm tmp/a", "rm tmp/b", "ls")}
	cfg := agent.Config{Tools: []tool.Tool{sh.tool()}, Loop: agent.LoopConfig{RiskPolicy: shellPolicy}}
	o := subOrch(t, s, cfg, &emailAgent{})

	res, err := o.HandleMessage(ctx, msg("Clean up."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 1 || len(res.Waiting) != 1 {
		t.Fatalf("status %s, approvals %+v", res.Status, res.PendingApprovals)
	}
	req := res.PendingApprovals[0]
	if req.AgentName != "tool:shell" || req.Details["arguments"] != `{"cmd":"rm tmp/a"}` || !slices.Equal(res.Waiting[0].Path, []string{"sp1"}) {
		t.Fatalf("request %+v, waiting %+v", req, res.Waiting[0])
	}
	if got := sh.commands(); !slices.Equal(got, []string{"ls"}) {
		t.Fatalf("ran %q before the decision; want only ls", got)
	}
	res2, err := o.ResolveApproval(ctx, "u1", req.ID, approval.Decision{Action: approval.Approve, Fingerprint: req.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.commands(); !slices.Equal(got, []string{"ls", "rm tmp/a"}) {
		t.Fatalf("ran %q after approval", got)
	}
	wr := s.workerRequests("Clean the tmp dir.")
	if len(wr) != 2 {
		t.Fatalf("the sub-agent made %d loop calls, want 2", len(wr))
	}
	results := toolResults(wr[1])
	if r := results["k1"]; r.IsError || r.Content != "ran rm tmp/a" {
		t.Fatalf("the resumed sub-agent reads %+v", r)
	}
	if r := results["k2"]; !r.IsError || !strings.Contains(r.Content, "another action of this turn waits") {
		t.Fatalf("the second risky call of the turn reads %+v", r)
	}
	if res2.Response != "Done: Worker: ran rm tmp/a" || res2.Status != agent.StatusCompleted {
		t.Fatalf("resolve result %q (%s)", res2.Response, res2.Status)
	}
	if _, err := o.ResolveApproval(ctx, "u1", req.ID, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("second decision: %v", err)
	}
	if n := len(sh.commands()); n != 2 {
		t.Fatalf("ran %d commands", n)
	}
}

// A critical call inside a sub-agent is denied there; the sub-agent goes
// on and answers.
func TestCriticalCallInsideSubAgentDenied(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	s := &subScript{t: t, coord: func(req llm.Request) llmtest.Reply {
		if r, ok := toolResults(req)["sp1"]; ok {
			return llmtest.Text("Done: " + firstLine(r.Content))
		}
		return llmtest.Calls(spawnCall("sp1", map[string]any{"task": "Wipe."}))
	}, worker: shellWorker("sudo rm -rf /")}
	cfg := agent.Config{Tools: []tool.Tool{sh.tool()}, Loop: agent.LoopConfig{RiskPolicy: shellPolicy}}
	o := subOrch(t, s, cfg, &emailAgent{})
	res, err := o.HandleMessage(ctx, msg("Wipe it."))
	if err != nil {
		t.Fatal(err)
	}
	if len(sh.commands()) != 0 || !strings.Contains(res.Response, "denied by the risk policy") || len(res.PendingApprovals) != 0 {
		t.Fatalf("ran %v; res %q %+v", sh.commands(), res.Response, res.PendingApprovals)
	}
}
