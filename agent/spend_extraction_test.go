package agent_test

import (
	"context"
	"math"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// Background fact extraction (MemoryOptions.Extract) calls the model with
// o.llm.Complete directly: its cost is in no Result.Consumed and never
// reaches the SpendGuard, so a tenant's daily/monthly limit undercounts
// (here by half: one loop call + one extraction call per message).
func TestSpendBackgroundExtractionNotRecorded(t *testing.T) {
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.ToolChoice == agent.RememberToolName {
			return llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call(agent.RememberToolName, `{"facts":[]}`)}, Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}}
		}
		return llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}}
	})
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 100}})
	if err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, s, agent.Config{Prices: testPrices, SpendGuard: g, MemoryOptions: agent.MemoryOptions{Extract: true}})
	if _, err := o.HandleMessage(context.Background(), msg("I live in Paris.")); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.Calls() != 2 {
		t.Fatalf("%d model calls, want 2 (loop + extraction)", s.Calls())
	}
	day, _ := g.Spent("u1")
	if math.Abs(day-0.60) > 1e-9 {
		t.Errorf("SpendLimits recorded $%.2f for the tenant; the model was called twice at $0.30: want $0.60", day)
	}
}
