package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

const workerPrompt = "You are a worker."

// spawnCall is a spawn_agent call with the given id and arguments.
func spawnCall(id string, args map[string]any) llm.ToolCall {
	raw, _ := json.Marshal(args)
	return llm.ToolCall{ID: id, Name: agent.SpawnAgentTool, Arguments: raw}
}

// isWorker reports whether req is a sub-agent's: its system prompt is the
// worker prompt.
func isWorker(req llm.Request) bool {
	return len(req.Messages) > 0 && req.Messages[0].Role == llm.RoleSystem && req.Messages[0].Content == workerPrompt
}

// firstUser is the text of req's first user message.
func firstUser(req llm.Request) string {
	for _, m := range req.Messages {
		if m.Role == llm.RoleUser {
			return m.Content
		}
	}
	return ""
}

// toolResults returns the tool messages of req, by tool call ID.
func toolResults(req llm.Request) map[string]llm.Message {
	out := map[string]llm.Message{}
	for _, m := range req.Messages {
		if m.Role == llm.RoleTool {
			out[m.ToolCallID] = m
		}
	}
	return out
}

func hasTool(req llm.Request, name string) bool {
	return slices.ContainsFunc(req.Tools, func(s llm.ToolSpec) bool { return s.Name == name })
}

func subAgents(cfg agent.SubAgentOptions) agent.SubAgentOptions {
	cfg.Enabled = true
	cfg.WorkerPrompt = workerPrompt
	return cfg
}

// A sub-agent runs on a fresh context (the worker prompt, its task and
// context), and its final message is the spawn's tool result; its usage
// counts in the parent's Result; the history holds only the parent's turn.
func TestSpawnAgentReturnsFinalMessage(t *testing.T) {
	var mu sync.Mutex
	var child []llm.Request
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			mu.Lock()
			child = append(child, req)
			mu.Unlock()
			return llmtest.Reply{Text: "Hotel Lumen is the best.", Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}
		}
		if r, ok := toolResults(req)["sp1"]; ok {
			return llmtest.Reply{Text: "Your pick: " + strings.SplitN(r.Content, "\n", 2)[0], Usage: llm.Usage{InputTokens: 20, OutputTokens: 2}}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp1", map[string]any{"task": "Compare three hotels.", "context": "Budget 200 EUR."})},
			Usage: llm.Usage{InputTokens: 10, OutputTokens: 1}}
	})
	o := newOrch(t, model, agent.Config{SystemPrompt: "You are Koi.", SubAgents: subAgents(agent.SubAgentOptions{})})
	if !slices.ContainsFunc(o.Tools(), func(s llm.ToolSpec) bool { return s.Name == agent.SpawnAgentTool }) {
		t.Fatal("spawn_agent is not offered")
	}
	res, err := o.HandleMessage(context.Background(), msg("Find me a hotel."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Response != "Your pick: Hotel Lumen is the best." {
		t.Fatalf("response %q", res.Response)
	}
	if len(child) != 1 {
		t.Fatalf("%d sub-agent calls, want 1", len(child))
	}
	c := child[0]
	if len(c.Messages) != 2 || !strings.Contains(c.Messages[1].Content, "Compare three hotels.") || !strings.Contains(c.Messages[1].Content, "Budget 200 EUR.") {
		t.Fatalf("sub-agent was sent %+v, want the worker prompt and its task with context only", c.Messages)
	}
	if got := res.Usage.Total(); got != 11+110+22 {
		t.Fatalf("Result.Usage total %d, want the parent's and the sub-agent's 143", got)
	}
	if res.Consumed.Tokens != 143 {
		t.Fatalf("Result.Consumed.Tokens %d, want 143", res.Consumed.Tokens)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].ResultStatus != "completed" || res.ToolCalls[0].Duration <= 0 {
		t.Fatalf("tool calls %+v", res.ToolCalls)
	}
	h, err := o.History(context.Background(), "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range h {
		if m.Role == llm.RoleUser && strings.Contains(m.Content, "Compare three hotels.") {
			t.Fatal("the sub-agent's task was saved to the history")
		}
	}
	if len(h) != 4 {
		t.Fatalf("history has %d messages, want the parent's 4", len(h))
	}
}

// Two spawns of one reply run at the same time: each sub-agent's model
// call waits until the other's has arrived.
func TestSpawnAgentsRunConcurrently(t *testing.T) {
	arrived := make(chan string, 2)
	both := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	seen := 0
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			arrived <- firstUser(req)
			mu.Lock()
			seen++
			if seen == 2 {
				once.Do(func() { close(both) })
			}
			mu.Unlock()
			select {
			case <-both:
				return llmtest.Text("together")
			case <-time.After(10 * time.Second):
				return llmtest.Text("alone")
			}
		}
		if rs := toolResults(req); len(rs) == 2 {
			return llmtest.Text(strings.SplitN(rs["a"].Content, "\n", 2)[0] + "+" + strings.SplitN(rs["b"].Content, "\n", 2)[0])
		}
		return llmtest.Calls(spawnCall("a", map[string]any{"task": "one"}), spawnCall("b", map[string]any{"task": "two"}))
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{})})
	res, err := o.HandleMessage(context.Background(), msg("Do two things."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Response != "together+together" {
		t.Fatalf("response %q: the sub-agents did not run at the same time", res.Response)
	}
}

// At MaxDepth a sub-agent is not offered spawn_agent: with the default
// depth 2, the coordinator's sub-agent has it and its own has not.
func TestSpawnAgentDepthLimitIsStructural(t *testing.T) {
	var mu sync.Mutex
	tools := map[string]bool{}
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			task := firstUser(req)
			mu.Lock()
			tools[task] = hasTool(req, agent.SpawnAgentTool)
			mu.Unlock()
			if task == "level one" && len(toolResults(req)) == 0 {
				return llmtest.Calls(spawnCall("deep", map[string]any{"task": "level two"}))
			}
			return llmtest.Text("done " + task)
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("all done")
		}
		return llmtest.Calls(spawnCall("top", map[string]any{"task": "level one"}))
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{})})
	if _, err := o.HandleMessage(context.Background(), msg("Go.")); err != nil {
		t.Fatal(err)
	}
	if !tools["level one"] {
		t.Fatal("the depth-1 sub-agent was not offered spawn_agent")
	}
	if has, ok := tools["level two"]; !ok || has {
		t.Fatalf("the depth-2 sub-agent ran %v and was offered spawn_agent %v; want it run without the tool", ok, has)
	}
}

// A sub-agent at MaxDepth that calls spawn_agent anyway gets an error
// result and nothing starts.
func TestSpawnAgentPastDepthStartsNothing(t *testing.T) {
	var mu sync.Mutex
	var tasks []string
	var deepResult llm.Message
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			mu.Lock()
			defer mu.Unlock()
			tasks = append(tasks, firstUser(req))
			if r, ok := toolResults(req)["deep"]; ok {
				deepResult = r
				return llmtest.Text("could not delegate")
			}
			return llmtest.Calls(spawnCall("deep", map[string]any{"task": "level two"}))
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("ok")
		}
		return llmtest.Calls(spawnCall("top", map[string]any{"task": "level one"}))
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{MaxDepth: 1})})
	if _, err := o.HandleMessage(context.Background(), msg("Go.")); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(tasks, "level two") {
		t.Fatal("a sub-agent past the depth limit was started")
	}
	if !deepResult.IsError || !strings.Contains(deepResult.Content, "cannot start sub-agents") {
		t.Fatalf("the spawn past the depth limit got %+v, want an error result", deepResult)
	}
}

// A sub-agent past its Timeout is stopped; the parent reads a marked error
// result and goes on.
func TestSpawnAgentTimeout(t *testing.T) {
	var got llm.Message
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return llmtest.Reply{Text: "too late", Delay: time.Minute}
		}
		if r, ok := toolResults(req)["sp"]; ok {
			got = r
			return llmtest.Text("The helper timed out.")
		}
		return llmtest.Calls(spawnCall("sp", map[string]any{"task": "slow"}))
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Timeout: 50 * time.Millisecond})})
	res, err := o.HandleMessage(context.Background(), msg("Go."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Response != "The helper timed out." || !got.IsError || !strings.Contains(got.Content, "timed out after 50ms") {
		t.Fatalf("response %q, spawn result %+v", res.Response, got)
	}
}

// A spawn given a budget share is stopped when it has used it: its partial
// answer is returned, marked, and its consumption counts in the parent's.
func TestSpawnAgentBudgetShare(t *testing.T) {
	var got llm.Message
	ran := 0
	echo := tool.New("echo", "Echo", func(_ context.Context, in struct {
		S string `json:"s"`
	}) (string, error) {
		ran++
		return in.S, nil
	})
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			if len(req.Tools) == 0 {
				return llmtest.Text("found two of three")
			}
			return llmtest.Calls(llm.ToolCall{Name: "echo", Arguments: []byte(`{"s":"x"}`)})
		}
		if r, ok := toolResults(req)["sp"]; ok {
			got = r
			return llmtest.Text("partial")
		}
		// 10 tool calls; the spawn is one; a fifth of the 9 left is 1.
		return llmtest.Calls(spawnCall("sp", map[string]any{"task": "search", "budget_share": 0.2}))
	})
	o := newOrch(t, model, agent.Config{Tools: []tool.Tool{echo}, SubAgents: subAgents(agent.SubAgentOptions{})})
	m := msg("Go.")
	m.Budget = agent.Budget{MaxToolCalls: 10}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Fatalf("the sub-agent ran %d tool calls, want its share 1", ran)
	}
	if !strings.Contains(got.Content, "found two of three") || !strings.Contains(got.Content, "budget share ran out") {
		t.Fatalf("spawn result %q, want the partial answer marked", got.Content)
	}
	if res.ToolCalls[0].ResultStatus != "budget_spent" {
		t.Fatalf("ResultStatus %q", res.ToolCalls[0].ResultStatus)
	}
	if res.Consumed.ToolCalls != 2 {
		t.Fatalf("Consumed.ToolCalls %d, want the spawn and the sub-agent's call", res.Consumed.ToolCalls)
	}
}

// A spawn past the parent's budget starts nothing.
func TestSpawnAgentNoBudgetLeft(t *testing.T) {
	var got llm.Message
	workers := 0
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			workers++
			return llmtest.Text("x")
		}
		if r, ok := toolResults(req)["sp"]; ok {
			got = r
			return llmtest.Text("done")
		}
		return llmtest.Calls(spawnCall("sp", map[string]any{"task": "search"}))
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{})})
	m := msg("Go.")
	m.Budget = agent.Budget{MaxToolCalls: 1} // the spawn itself
	if _, err := o.HandleMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if workers != 0 || !got.IsError {
		t.Fatalf("%d sub-agent calls, result %+v; want none and an error result", workers, got)
	}
}

// Bad SubAgentOptions are refused.
func TestSubAgentOptionsRejected(t *testing.T) {
	_, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), SubAgents: agent.SubAgentOptions{Enabled: true, MaxDepth: -1}})
	if !errors.Is(err, agent.ErrInvalidConfig) {
		t.Fatalf("err %v, want ErrInvalidConfig", err)
	}
}

// Cancelling the parent's ctx stops its sub-agents: the run ends
// cancelled and the spawn's record says it was interrupted (goleak checks
// that no goroutine is left).
func TestSpawnAgentCancelled(t *testing.T) {
	started := make(chan struct{}, 2)
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			started <- struct{}{}
			return llmtest.Reply{Text: "never", Delay: time.Hour}
		}
		return llmtest.Calls(spawnCall("a", map[string]any{"task": "one"}), spawnCall("b", map[string]any{"task": "two"}))
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{})})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		<-started
		cancel()
	}()
	res, err := o.HandleMessage(ctx, msg("Go."))
	if !errors.Is(err, context.Canceled) || res.Status != agent.StatusCancelled {
		t.Fatalf("status %v, err %v", res.Status, err)
	}
	for _, c := range res.ToolCalls {
		if c.ResultStatus != "interrupted" {
			t.Fatalf("spawn %s: %q, want interrupted", c.ID, c.ResultStatus)
		}
	}
}
