package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
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

// mailerWithoutEmail is the mailer skill after an operator removed
// send_email from its tools.
const mailerWithoutEmail = `---
name: mailer
description: Drafts and sends emails.
tools: [save_note]
---
Write short emails.
`

// A specialist parked on send_email; the operator then redeploys with the
// mailer skill no longer listing send_email. Deciding the old request must
// not run an action the current skill does not allow: the request is
// stale (or refused with a clear error), and nothing is sent.
func TestParkedSpecialistDecidedAfterItsSkillDroppedTheTool(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var reqs []llm.Request
	shared := newPool(t, pool.MemoryConfig{})
	email := &emailAgent{}
	model := specialistScript(t, "mailer", &reqs, &mu)
	o := agentsOrch(t, model, agent.Config{Pool: shared, SubAgents: subAgents(agent.SubAgentOptions{}),
		Skills: loadSkills(t, map[string]string{"mailer/SKILL.md": mailerSkill})}, email, &noteAgent{})
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("approvals %+v", res.PendingApprovals)
	}
	restarted := agentsOrch(t, model, agent.Config{Pool: shared, SubAgents: subAgents(agent.SubAgentOptions{}),
		Skills: loadSkills(t, map[string]string{"mailer/SKILL.md": mailerWithoutEmail})}, email, &noteAgent{})
	_, err = restarted.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
	if n := len(email.Sent()); n != 0 {
		t.Fatalf("the email was sent %d time(s) by a specialist whose skill no longer lists send_email (err %v)", n, err)
	}
	if !errors.Is(err, agent.ErrStaleAgent) {
		t.Fatalf("the decision: %v, want ErrStaleAgent", err)
	}
	if p, err := restarted.ListPendingApprovals(ctx, "u1"); err != nil || len(p) != 0 {
		t.Fatalf("the stale request is still pending: %+v, %v", p, err)
	}
}

// A specialist parked on the model its skill named ("fast"); the operator
// redeploys with the skill naming no model and "fast" gone from
// Config.Models. Deciding the request must not consume it silently: either
// the action runs once and the specialist goes on (on a model the current
// configuration has), or the decision fails and nothing is lost.
func TestParkedSpecialistDecidedAfterItsModelWasRemoved(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var reqs []llm.Request
	shared := newPool(t, pool.MemoryConfig{})
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	email := &emailAgent{}
	model := specialistScript(t, "mailer", &reqs, &mu)
	withFast := strings.Replace(mailerSkill, "tools:", "model: fast\ntools:", 1)
	o := agentsOrch(t, model, agent.Config{Pool: shared, Memory: mem, SubAgents: subAgents(agent.SubAgentOptions{}),
		Models: agent.ModelMap{"fast": model},
		Skills: loadSkills(t, map[string]string{"mailer/SKILL.md": withFast})}, email, &noteAgent{})
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("approvals %+v", res.PendingApprovals)
	}
	id := res.PendingApprovals[0].ID
	restarted := agentsOrch(t, model, agent.Config{Pool: shared, Memory: mem, SubAgents: subAgents(agent.SubAgentOptions{}),
		Skills: loadSkills(t, map[string]string{"mailer/SKILL.md": mailerSkill})}, email, &noteAgent{})
	res2, err := restarted.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve})
	sent := len(email.Sent())
	pending, _ := restarted.ListPendingApprovals(ctx, "u1")
	if err == nil && sent != 1 {
		h, _ := restarted.History(ctx, "u1", "c1")
		t.Fatalf("the approved action was consumed without running: sent %d, still pending %d, response %q, spawn result %q",
			sent, len(pending), res2.Response, spawnResumeResult(h, id))
	}
	if err != nil && sent != 0 {
		t.Fatalf("err %v but sent %d", err, sent)
	}
	// The model is checked before the request is taken: it is stale.
	if !errors.Is(err, agent.ErrStaleAgent) || len(pending) != 0 {
		t.Fatalf("the decision: %v, still pending %d; want ErrStaleAgent and the request discarded", err, len(pending))
	}
}

// leadSkill is a specialist that delegates: its workers inherit its tools.
const leadSkill = `---
name: lead
description: Leads the work.
tools: [spawn_agent, send_email]
---
Delegate the work.
`

// A worker that a specialist spawned parks (depth 2); the orchestrator
// restarts. With the specialist's skill unchanged, the decision resumes
// both and the action runs once; with the skill no longer listing
// spawn_agent, the outer level could not have waited on its worker: the
// request is stale and nothing runs.
func TestNestedParkUnderASpecialistCheckedAgainstItsSkill(t *testing.T) {
	worker := func(task string, req llm.Request) llmtest.Reply {
		if task == "level one" {
			if r, ok := toolResults(req)["deep"]; ok {
				return llmtest.Text("One: " + firstLine(r.Content))
			}
			return llmtest.Calls(spawnCall("deep", map[string]any{"task": "level two"}))
		}
		return emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)(task, req)
	}
	coord := func(req llm.Request) llmtest.Reply {
		if strings.HasPrefix(req.Messages[0].Content, workerPrompt) { // the specialist: the worker prompt and its skill's body
			return worker(firstUser(req), req)
		}
		if m, ok := resumedResult(req); ok {
			return llmtest.Text("Done: " + firstLine(m.Content))
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("Waiting.")
		}
		return llmtest.Calls(spawnCall("sp1", map[string]any{"task": "level one", "skill": "lead"}))
	}
	for name, lead := range map[string]string{
		"skill unchanged":       leadSkill,
		"spawn_agent withdrawn": strings.Replace(leadSkill, "[spawn_agent, send_email]", "[send_email]", 1),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			shared := newPool(t, pool.MemoryConfig{})
			email := &emailAgent{}
			mk := func(lead string) *agent.Orchestrator {
				s := &subScript{t: t, coord: coord, worker: worker}
				return subOrch(t, s, agent.Config{Pool: shared, Skills: loadSkills(t, map[string]string{"lead/SKILL.md": lead})}, email)
			}
			res, err := mk(leadSkill).HandleMessage(ctx, msg("Go."))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.PendingApprovals) != 1 {
				t.Fatalf("approvals %+v, response %q", res.PendingApprovals, res.Response)
			}
			res2, err := mk(lead).ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
			if lead == leadSkill {
				if err != nil || len(email.Sent()) != 1 || res2.Response != "Done: One: Worker: Email sent to team@example.com" {
					t.Fatalf("err %v, sent %d, response %+v", err, len(email.Sent()), res2)
				}
				return
			}
			if !errors.Is(err, agent.ErrStaleAgent) || len(email.Sent()) != 0 {
				t.Fatalf("err %v, sent %d; want ErrStaleAgent and nothing sent", err, len(email.Sent()))
			}
		})
	}
}
