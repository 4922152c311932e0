package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/skill"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// NewOrchestrator refuses skills it cannot run: without sub-agents, or
// naming a tool or a model that does not exist.
func TestSkillConfigRefused(t *testing.T) {
	tools := []tool.Tool{countingTool("web_search", new(atomic.Int32))}
	for _, tc := range []struct {
		name  string
		cfg   agent.Config
		kind  error
		words string
	}{
		{"no sub-agents", agent.Config{Tools: tools, Skills: loadSkills(t, map[string]string{"r/SKILL.md": "---\nname: r\ndescription: R.\ntools: [web_search]\n---\nB\n"})},
			nil, "SubAgents"},
		{"unknown tool", agent.Config{Tools: tools, SubAgents: subAgents(agent.SubAgentOptions{}),
			Skills: loadSkills(t, map[string]string{"r/SKILL.md": "---\nname: r\ndescription: R.\ntools: [web_search, fetch_page]\n---\nB\n"})},
			skill.ErrUnknownTool, `"fetch_page"`},
		{"unknown model, no Models", agent.Config{Tools: tools, SubAgents: subAgents(agent.SubAgentOptions{}),
			Skills: loadSkills(t, map[string]string{"r/SKILL.md": "---\nname: r\ndescription: R.\nmodel: smart\n---\nB\n"})},
			skill.ErrUnknownModel, `"smart"`},
		{"unknown model", agent.Config{Tools: tools, SubAgents: subAgents(agent.SubAgentOptions{}), Models: agent.ModelMap{"fast": llmtest.NewScript()},
			Skills: loadSkills(t, map[string]string{"r/SKILL.md": "---\nname: r\ndescription: R.\nmodel: smart\n---\nB\n"})},
			skill.ErrUnknownModel, `"smart"`},
		{"hidden Agent-Tool", agent.Config{Tools: tools, SubAgents: subAgents(agent.SubAgentOptions{}), Agents: hiddenAgent(t),
			Skills: loadSkills(t, map[string]string{"r/SKILL.md": "---\nname: r\ndescription: R.\ntools: [send_email]\n---\nB\n"})},
			skill.ErrUnknownTool, `"send_email"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.LLM = llmtest.NewScript()
			_, err := agent.NewOrchestrator(tc.cfg)
			if !errors.Is(err, agent.ErrInvalidConfig) || tc.kind != nil && !errors.Is(err, tc.kind) || err == nil || !strings.Contains(err.Error(), tc.words) {
				t.Fatalf("err %v", err)
			}
		})
	}
}

func hiddenAgent(t *testing.T) *agent.Registry {
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email", sendEmail{}, agent.ExposeAsTool(false)); err != nil {
		t.Fatal(err)
	}
	return reg
}

// Skills may list plain tools, Agent-Tools and spawn_agent, and name a
// model Config.Models answers; an empty Set needs no sub-agents.
func TestSkillConfigAccepted(t *testing.T) {
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email", sendEmail{}); err != nil {
		t.Fatal(err)
	}
	_, err := agent.NewOrchestrator(agent.Config{
		LLM: llmtest.NewScript(), Tools: []tool.Tool{countingTool("web_search", new(atomic.Int32))}, Agents: reg,
		Models: agent.ModelMap{"smart": llmtest.NewScript()}, SubAgents: subAgents(agent.SubAgentOptions{}),
		Skills: loadSkills(t, map[string]string{"r/SKILL.md": "---\nname: r\ndescription: R.\nmodel: smart\ntools: [web_search, send_email, spawn_agent]\n---\nB\n"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	empty, err := skill.Load(fstest.MapFS{"README.md": {Data: []byte("no skills")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), Skills: empty}); err != nil {
		t.Fatal(err)
	}
}

// With ToolSources, a skill may list a source's tool: accepted when the
// orchestrator is built, checked when a spawn starts the skill. While the
// source offers it the specialist has it; once it is gone the spawn is
// an error result naming it, and nothing starts.
func TestSkillToolFromSourceCheckedAtSpawn(t *testing.T) {
	var runs, specCalls atomic.Int32
	src := &listSource{}
	src.set(countingTool("mcp_search", &runs))
	var offered []string
	var result llm.Message
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if specialistOf(req) == "r" {
			specCalls.Add(1)
			if _, ok := toolResults(req)["q"]; ok {
				return llmtest.Text("found")
			}
			offered = toolNames(req.Tools)
			return llmtest.Calls(llm.ToolCall{ID: "q", Name: "mcp_search", Arguments: []byte(`{}`)})
		}
		if r, ok := toolResults(req)["sp"]; ok {
			result = r
			return llmtest.Text("ok")
		}
		return llmtest.Calls(spawnCall("sp", map[string]any{"task": "Search.", "skill": "r"}))
	})
	o := newOrch(t, model, agent.Config{
		ToolSources: []agent.ToolSource{src}, SubAgents: subAgents(agent.SubAgentOptions{}),
		Skills: loadSkills(t, map[string]string{"r/SKILL.md": "---\nname: r\ndescription: R.\ntools: [mcp_search]\n---\nB\n"}),
	})
	if _, err := o.HandleMessage(context.Background(), msg("Go.")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(offered, []string{"mcp_search"}) || runs.Load() != 1 || result.IsError {
		t.Fatalf("offered %v, runs %d, result %+v", offered, runs.Load(), result)
	}
	src.set()
	specCalls.Store(0)
	m := msg("Again.")
	m.ConversationID = "c2"
	if _, err := o.HandleMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if specCalls.Load() != 0 || !result.IsError || !strings.Contains(result.Content, `"mcp_search"`) {
		t.Fatalf("specialist calls %d, result %+v", specCalls.Load(), result)
	}
}

type sendEmailIn struct {
	To string `json:"to"`
}

// sendEmail is an Agent-Tool that must not run.
type sendEmail struct{}

func (sendEmail) Run(context.Context, sendEmailIn) (agent.Reply, error) {
	return agent.Reply{}, errors.New("must not run")
}
