package agent_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A sub-agent spawned by a specialist without a skill gets at most the
// specialist's tools, at every depth, never the coordinator's; a
// specialist spawning with a skill gets exactly that skill's tools.
func TestSkillScopeInheritedThroughNestedSpawns(t *testing.T) {
	var weather, search, mail atomic.Int32
	var mu sync.Mutex
	offered := map[string][]string{}
	prompts := map[string]string{}
	results := map[string]llm.Message{}
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		task := firstUser(req)
		res := toolResults(req)
		if len(res) == 0 {
			offered[task] = toolNames(req.Tools)
			prompts[task] = req.Messages[0].Content
		}
		for id, m := range res {
			results[id] = m
		}
		switch task {
		case "lead":
			if len(res) == 2 {
				return llmtest.Text("lead done")
			}
			return llmtest.Calls(
				spawnCall("W", map[string]any{"task": "worker"}),
				spawnCall("M", map[string]any{"task": "mail", "skill": "mailer"}))
		case "worker":
			if len(res) == 2 {
				return llmtest.Text("worker done")
			}
			return llmtest.Calls(
				llm.ToolCall{ID: "X", Name: "send_mail", Arguments: []byte(`{}`)},
				spawnCall("D", map[string]any{"task": "deep"}))
		case "deep":
			if len(res) == 2 {
				return llmtest.Text("deep done")
			}
			return llmtest.Calls(
				llm.ToolCall{ID: "Y", Name: "get_weather", Arguments: []byte(`{}`)},
				spawnCall("Z", map[string]any{"task": "deeper"}))
		case "mail":
			if len(res) == 1 {
				return llmtest.Text("mailed")
			}
			return llmtest.Calls(llm.ToolCall{ID: "S", Name: "send_mail", Arguments: []byte(`{}`)})
		default: // the coordinator
			if len(res) == 1 {
				return llmtest.Text("all done")
			}
			return llmtest.Calls(spawnCall("L", map[string]any{"task": "lead", "skill": "lead"}))
		}
	})
	o := newOrch(t, model, agent.Config{
		Tools:     []tool.Tool{countingTool("get_weather", &weather), countingTool("web_search", &search), countingTool("send_mail", &mail)},
		SubAgents: subAgents(agent.SubAgentOptions{MaxDepth: 3}),
		Skills: loadSkills(t, map[string]string{
			"lead/SKILL.md":   "---\nname: lead\ndescription: Leads.\ntools: [web_search, spawn_agent]\n---\nDelegate.\n",
			"mailer/SKILL.md": "---\nname: mailer\ndescription: Mails.\ntools: send_mail\n---\nMail.\n",
		}),
	})
	res, err := o.HandleMessage(context.Background(), msg("Go."))
	if err != nil || res.Response != "all done" {
		t.Fatalf("res %+v, err %v", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string][]string{
		"lead":   {"web_search", agent.SpawnAgentTool},
		"worker": {"web_search", agent.SpawnAgentTool}, // the lead's, not the coordinator's
		"deep":   {"web_search"},                       // the lead's, and no spawn_agent at MaxDepth
		"mail":   {"send_mail"},                        // the mailer skill's
	}
	for task, w := range want {
		if !slices.Equal(offered[task], w) {
			t.Errorf("%s offered %v, want %v", task, offered[task], w)
		}
	}
	for _, task := range []string{"worker", "deep"} {
		if prompts[task] != workerPrompt { // neither the lead's instructions nor the index
			t.Errorf("%s's system prompt %q, want the worker prompt", task, prompts[task])
		}
	}
	if _, ok := offered["deeper"]; ok {
		t.Error("a sub-agent started past MaxDepth")
	}
	for _, id := range []string{"X", "Y", "Z"} {
		if r := results[id]; !r.IsError || !strings.Contains(r.Content, "unknown tool") {
			t.Errorf("call %s out of scope: %+v", id, r)
		}
	}
	if weather.Load() != 0 || mail.Load() != 1 {
		t.Fatalf("get_weather ran %d times (want 0), send_mail %d (want 1: the mailer's)", weather.Load(), mail.Load())
	}
}

// spawn_agent is no escape hatch: a specialist whose skill does not list
// it cannot start a sub-agent, even below MaxDepth.
func TestSkillWithoutSpawnAgentCannotSpawn(t *testing.T) {
	var workerCalls atomic.Int32
	var result llm.Message
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		switch firstUser(req) {
		case "research":
			if r, ok := toolResults(req)["E"]; ok {
				result = r
				return llmtest.Text("done")
			}
			return llmtest.Calls(spawnCall("E", map[string]any{"task": "escape"}))
		case "escape":
			workerCalls.Add(1)
			return llmtest.Text("escaped")
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("ok")
		}
		return llmtest.Calls(spawnCall("sp", map[string]any{"task": "research", "skill": "research"}))
	})
	o := newOrch(t, model, agent.Config{
		Tools:     []tool.Tool{countingTool("get_weather", new(atomic.Int32)), countingTool("web_search", new(atomic.Int32))},
		SubAgents: subAgents(agent.SubAgentOptions{MaxDepth: 5}),
		Skills:    loadSkills(t, map[string]string{"research/SKILL.md": researchSkill}),
	})
	if _, err := o.HandleMessage(context.Background(), msg("Go.")); err != nil {
		t.Fatal(err)
	}
	if workerCalls.Load() != 0 || !result.IsError || !strings.Contains(result.Content, `unknown tool "spawn_agent"`) {
		t.Fatalf("worker calls %d, result %+v", workerCalls.Load(), result)
	}
}

// A skill's model runs its specialist, through Config.Models; a sub-agent
// without a skill runs on its parent's model.
func TestSkillModelRoutesToNamedClient(t *testing.T) {
	type got struct {
		mu    sync.Mutex
		tasks []string
	}
	var def, smart, fast got
	client := func(g *got) *llmtest.Script {
		return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
			task := firstUser(req)
			g.mu.Lock()
			g.tasks = append(g.tasks, task)
			g.mu.Unlock()
			switch {
			case task == "research" || task == "plain":
				return llmtest.Text(task + " done")
			case len(toolResults(req)) == 2:
				return llmtest.Text("all done")
			}
			return llmtest.Calls(
				spawnCall("a", map[string]any{"task": "research", "skill": "research"}),
				spawnCall("b", map[string]any{"task": "plain"}))
		})
	}
	o := newOrch(t, client(&def), agent.Config{
		Models:    agent.ModelMap{"smart": client(&smart), "fast": client(&fast)},
		Tools:     []tool.Tool{countingTool("get_weather", new(atomic.Int32)), countingTool("web_search", new(atomic.Int32))},
		SubAgents: subAgents(agent.SubAgentOptions{}),
		Skills: loadSkills(t, map[string]string{"research/SKILL.md": strings.Replace(researchSkill,
			"tools:", "model: smart\ntools:", 1)}),
	})
	res, err := o.HandleMessage(context.Background(), msg("Go."))
	if err != nil || res.Response != "all done" {
		t.Fatalf("res %+v, err %v", res, err)
	}
	slices.Sort(def.tasks)
	if !slices.Equal(smart.tasks, []string{"research"}) || !slices.Equal(def.tasks, []string{"Go.", "Go.", "plain"}) || len(fast.tasks) != 0 {
		t.Fatalf("smart %v, default %v, fast %v", smart.tasks, def.tasks, fast.tasks)
	}
}
