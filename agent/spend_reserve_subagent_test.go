package agent_test

import (
	"context"
	"math"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A sub-agent's model calls are reserved and settled like its parent's,
// so concurrent runs cannot overshoot a limit through spawn_agent; what
// they settled is not recorded a second time when the parent's run ends.
func TestSpendReserveCoversSubAgentCalls(t *testing.T) {
	sl, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 100}})
	if err != nil {
		t.Fatal(err)
	}
	g := &reserving{SpendLimits: sl}
	use := llm.Usage{InputTokens: 1000, OutputTokens: 200} // $0.30 at testPrices
	s := llmtest.NewScript(
		llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("s1", map[string]any{"task": "Find the hotel's phone number"})}, Usage: use},
		llmtest.Reply{Text: "+351 21 000 0000", Usage: use}, // the sub-agent
		llmtest.Reply{Text: "Its number is +351 21 000 0000.", Usage: use},
	)
	o := newOrch(t, s, agent.Config{Prices: testPrices, SpendGuard: g, SubAgents: agent.SubAgentOptions{Enabled: true}})
	if _, err := o.HandleMessage(context.Background(), msg("What is the hotel's number?")); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	reserved, settled := len(g.reserved), len(g.settled)
	g.mu.Unlock()
	if reserved != 3 || settled != 3 {
		t.Fatalf("%d reservations and %d settlements; want 3 each: the coordinator's two calls and the sub-agent's one", reserved, settled)
	}
	day, _ := sl.Spent("u1")
	if math.Abs(day-0.9) > 1e-9 {
		t.Fatalf("the day's spend is $%.4f; want $0.90, each call counted once", day)
	}
}
