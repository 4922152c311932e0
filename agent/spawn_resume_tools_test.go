package agent_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
)

// With Config.ToolSources, a sub-agent parked with a source's tool among
// its tools (a specialist whose skill lists it, or a worker given the
// run's) gets the same tools back when the decision resumes it, and the
// approved action runs once.
func TestResumedSubAgentKeepsItsSourceTools(t *testing.T) {
	t.Run("specialist", func(t *testing.T) {
		ctx := context.Background()
		var mu sync.Mutex
		var reqs []llm.Request
		src := &listSource{}
		src.set(countingTool("mcp_search", new(atomic.Int32)))
		email := &emailAgent{}
		cfg := agent.Config{ToolSources: []agent.ToolSource{src}, SubAgents: subAgents(agent.SubAgentOptions{}),
			Skills: loadSkills(t, map[string]string{"mailer/SKILL.md": strings.Replace(mailerSkill, "[send_email]", "[mcp_search, send_email]", 1)})}
		o := agentsOrch(t, specialistScript(t, "mailer", &reqs, &mu), cfg, email, &noteAgent{})
		res, err := o.HandleMessage(ctx, msg("Tell the team."))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.PendingApprovals) != 1 {
			t.Fatalf("status %s, approvals %+v, response %q", res.Status, res.PendingApprovals, res.Response)
		}
		res2, err := o.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(email.Sent()); n != 1 || res2.Response != "Done: Specialist: Email sent to team@example.com" {
			t.Fatalf("sent %d, response %q", n, res2.Response)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(reqs) != 2 || !hasTool(reqs[1], "mcp_search") {
			t.Fatalf("the resumed specialist made %d calls; its last offered %v", len(reqs), toolNames(reqs[len(reqs)-1].Tools))
		}
	})
	t.Run("specialist decided by the reply", func(t *testing.T) {
		ctx := context.Background()
		var mu sync.Mutex
		var reqs []llm.Request
		src := &listSource{}
		src.set(countingTool("mcp_search", new(atomic.Int32)))
		email := &emailAgent{}
		cfg := agent.Config{ToolSources: []agent.ToolSource{src}, SubAgents: subAgents(agent.SubAgentOptions{}),
			Skills: loadSkills(t, map[string]string{"mailer/SKILL.md": strings.Replace(mailerSkill, "[send_email]", "[mcp_search, send_email]", 1)})}
		o := agentsOrch(t, specialistScript(t, "mailer", &reqs, &mu), cfg, email, &noteAgent{})
		if _, err := o.HandleMessage(ctx, msg("Tell the team.")); err != nil {
			t.Fatal(err)
		}
		res2, err := o.HandleMessage(ctx, msg("yes"))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(email.Sent()); n != 1 || res2.Response != "Done: Specialist: Email sent to team@example.com" {
			t.Fatalf("sent %d, response %q", n, res2.Response)
		}
	})
	t.Run("worker", func(t *testing.T) {
		ctx := context.Background()
		src := &listSource{}
		src.set(countingTool("mcp_search", new(atomic.Int32)))
		email := &emailAgent{}
		s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
		o := subOrch(t, s, agent.Config{ToolSources: []agent.ToolSource{src}}, email)
		res, err := o.HandleMessage(ctx, msg("Tell the team."))
		if err != nil {
			t.Fatal(err)
		}
		wr := s.workerRequests("Email the team.")
		if len(res.PendingApprovals) != 1 || len(wr) != 1 || !hasTool(wr[0], "mcp_search") {
			t.Fatalf("approvals %+v, worker requests %d", res.PendingApprovals, len(wr))
		}
		if _, err := o.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve}); err != nil {
			t.Fatal(err)
		}
		wr = s.workerRequests("Email the team.")
		if n := len(email.Sent()); n != 1 || len(wr) != 2 || !hasTool(wr[1], "mcp_search") {
			t.Fatalf("sent %d; the resumed worker made %d calls; its last offered %v", n, len(wr), toolNames(wr[len(wr)-1].Tools))
		}
	})
}
