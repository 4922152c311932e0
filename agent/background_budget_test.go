package agent_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/budget"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// awaitGraphEnd polls eng until the tenant's graph id ended.
func awaitGraphEnd(t *testing.T, eng delegate.Engine, tenant, id string) delegate.Graph {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, err := eng.Graph(context.Background(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if g.Status != delegate.GraphRunning {
			return g
		}
		if time.Now().After(deadline) {
			t.Fatalf("graph %s still running: %+v", id, g)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A graph's Budget is for the whole graph: independent tasks that the
// engine starts side by side share it, so together they spend at most
// the budget plus the one model call that crossed it. Here each task's
// sub-agent makes one call of 600 tokens under a budget of 1,000: run one
// after the other, the third finds the budget spent; run four at once,
// each is given the whole 1,000 and the graph spends 2,400.
func TestBackgroundParallelTasksShareGraphBudget(t *testing.T) {
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return llmtest.Reply{Text: "checked", Usage: llm.Usage{InputTokens: 600}}
		}
		return llmtest.Reply{Text: "Noted."}
	})
	eng := fastEngine(t, 1) // Parallel: 4
	o := newOrch(t, model, agent.Config{Clock: clock.System{}, SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	runEngine(t, eng, o)
	var specs []delegate.TaskSpec
	for i := range 4 {
		specs = append(specs, delegate.TaskSpec{ID: fmt.Sprintf("shop%d", i), Task: "Check one shop's price."})
	}
	g, err := delegate.NewGraph("u1", "c1", specs)
	if err != nil {
		t.Fatal(err)
	}
	g.Budget = budget.Limits{MaxTokens: 1000}
	if err := eng.Submit(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	end := awaitGraphEnd(t, eng, "u1", g.ID)
	completed := 0
	for _, task := range end.Tasks {
		if task.Status == delegate.TaskCompleted {
			completed++
		}
	}
	if end.Consumed.Tokens > 1000+600 {
		t.Fatalf("a graph with a budget of 1000 tokens spent %d (%d of 4 tasks completed): want at most the budget plus one call",
			end.Consumed.Tokens, completed)
	}
}

// Background work is paid from the coordinator's budget: a spawn's
// budget_share is a share of what the run has left, and what one
// background spawn took is not left for the next. Three background
// spawns in one turn, each with budget_share 1, together get at most
// what the run had left (about 10,000 tokens), not three times it.
func TestBackgroundSpawnsCannotMultiplyBudget(t *testing.T) {
	eng := newEngine(t) // not run: the graphs stay as submitted
	var mu sync.Mutex
	var results []string
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		tr := toolResults(req)
		if len(tr) > 0 {
			mu.Lock()
			for _, r := range tr {
				results = append(results, r.Content)
			}
			mu.Unlock()
			return llmtest.Reply{Text: "All started."}
		}
		var calls []llm.ToolCall
		for i := range 3 {
			calls = append(calls, spawnCall(fmt.Sprintf("sp%d", i), map[string]any{
				"task": "Watch prices, forever.", "background": true, "budget_share": 1}))
		}
		return llmtest.Reply{ToolCalls: calls, Usage: llm.Usage{InputTokens: 10}}
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	m := msg("Watch prices.")
	m.Budget = agent.Budget{MaxTokens: 10000}
	if _, err := o.HandleMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	total, started := 0, 0
	for _, r := range results {
		rest, ok := strings.CutPrefix(r, "Started in the background as graph ")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(rest, ":")
		g, err := eng.Graph(context.Background(), "u1", id)
		if err != nil {
			t.Fatal(err)
		}
		started++
		if g.Budget.MaxTokens == 0 {
			t.Fatalf("graph %s has no token cap", id)
		}
		total += g.Budget.MaxTokens
	}
	if total > 10000 {
		t.Fatalf("%d background graphs started with %d tokens in all, from a run that had 10000: want at most what was left", started, total)
	}
}
