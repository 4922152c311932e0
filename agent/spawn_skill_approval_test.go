package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool"
)

const mailerSkill = `---
name: mailer
description: Drafts and sends emails.
tools: [send_email]
---
Write short emails.
`

const notesSkill = `---
name: notes
description: Keeps notes.
tools: [save_note]
---
Keep notes.
`

// specialistScript is a model for a coordinator with skills: the
// specialist (its prompt holds "Instructions of skill") calls send_email
// once and answers with its result; the coordinator spawns skill on its
// first call and answers with the resumed spawn's first line.
func specialistScript(t *testing.T, skillName string, reqs *[]llm.Request, mu *sync.Mutex) llm.Client {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if len(req.Tools) == 0 {
			return llmtest.Text("Please confirm.")
		}
		if strings.Contains(req.Messages[0].Content, "Instructions of skill") {
			mu.Lock()
			*reqs = append(*reqs, req)
			mu.Unlock()
			if r, ok := toolResults(req)["e1"]; ok {
				return llmtest.Text("Specialist: " + r.Content)
			}
			return llmtest.Calls(llm.ToolCall{ID: "e1", Name: "send_email", Arguments: json.RawMessage(`{"to":"team@example.com","subject":"Plan"}`)})
		}
		if m, ok := resumedResult(req); ok {
			return llmtest.Text("Done: " + firstLine(m.Content))
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("Waiting.")
		}
		return llmtest.Calls(spawnCall("sp1", map[string]any{"task": "Email the team.", "skill": skillName}))
	})
}

// A specialist whose skill lists an Agent-Tool that needs approval parks
// like a worker; resumed, it has its skill's prompt and exactly its
// skill's tools again.
func TestSpecialistApprovalResumesInItsSkill(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var reqs []llm.Request
	email := &emailAgent{}
	cfg := agent.Config{Skills: loadSkills(t, map[string]string{"mailer/SKILL.md": mailerSkill}), SubAgents: subAgents(agent.SubAgentOptions{})}
	o := agentsOrch(t, specialistScript(t, "mailer", &reqs, &mu), cfg, email, &noteAgent{})
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 || !slices.Equal(res.Waiting[0].Path, []string{"sp1"}) {
		t.Fatalf("waiting %+v", res.Waiting)
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
	if len(reqs) != 2 {
		t.Fatalf("the specialist made %d calls, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Messages[0].Content != reqs[0].Messages[0].Content || !strings.Contains(r.Messages[0].Content, "Write short emails.") {
			t.Fatalf("request %d: prompt %q", i, r.Messages[0].Content)
		}
		names := make([]string, len(r.Tools))
		for j, sp := range r.Tools {
			names[j] = sp.Name
		}
		if !slices.Equal(names, []string{"send_email"}) {
			t.Fatalf("request %d: tools %v, want exactly the skill's", i, names)
		}
	}
}

// A specialist whose skill does not list the Agent-Tool cannot park on
// it: the call is an unknown tool's, and nothing waits.
func TestSpecialistOutOfScopeAgentToolDoesNotPark(t *testing.T) {
	var mu sync.Mutex
	var reqs []llm.Request
	email := &emailAgent{}
	cfg := agent.Config{Skills: loadSkills(t, map[string]string{"notes/SKILL.md": notesSkill}), SubAgents: subAgents(agent.SubAgentOptions{})}
	o := agentsOrch(t, specialistScript(t, "notes", &reqs, &mu), cfg, email, &noteAgent{})
	res, err := o.HandleMessage(context.Background(), msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 0 || res.Status != agent.StatusCompleted || len(email.Sent()) != 0 {
		t.Fatalf("status %s, approvals %+v", res.Status, res.PendingApprovals)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := toolResults(reqs[len(reqs)-1])["e1"]; !got.IsError || !strings.Contains(got.Content, "unknown tool") {
		t.Fatalf("the specialist read %+v", got)
	}
}

// A specialist's request is stale on an orchestrator that no longer has
// its skill: ErrStaleAgent, nothing runs.
func TestSpecialistApprovalStaleWithoutItsSkill(t *testing.T) {
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
	other := agentsOrch(t, model, agent.Config{Pool: shared, SubAgents: subAgents(agent.SubAgentOptions{}),
		Skills: loadSkills(t, map[string]string{"notes/SKILL.md": notesSkill})}, email, &noteAgent{})
	_, err = other.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
	if !errors.Is(err, agent.ErrStaleAgent) || len(email.Sent()) != 0 {
		t.Fatalf("err %v, sent %d; want ErrStaleAgent and nothing sent", err, len(email.Sent()))
	}
}
