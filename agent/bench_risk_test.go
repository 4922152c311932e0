package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// BenchmarkRisk measures the risk check on BenchmarkConversation/valet's
// workload (5 turns × 3 parallel calls, the doom-loop detector on): the
// bare loop, valet without a RiskPolicy ("off") and valet with a policy
// that returns the declared risk ("on"), in interleaved blocks of one
// run: per side ns/conv, allocs/conv, B/conv; x-time, x-allocs, x-bytes
// of on against bare, and on-off- of on against off:
//
//	go test -run '^$' -bench BenchmarkRisk -benchtime 2s ./agent/
func BenchmarkRisk(b *testing.B) {
	model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	cfg := agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()}
	off, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Loop.RiskPolicy = func(_ context.Context, _ llm.ToolCall, declared tool.Risk) (tool.Risk, error) { return declared, nil }
	on, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
	t := interleave(b, 100,
		bareSide(b, "bare", model, on.Tools(), nil),
		valetSide(b, "off", off, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		valetSide(b, "on", on, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
	)
	reportSide(b, "bare-", t[0])
	reportSide(b, "off-", t[1])
	reportSide(b, "on-", t[2])
	reportRatios(b, "x-time", "x-", t[2], t[0], true)
	reportRatios(b, "on-off-time", "on-off-", t[2], t[1], true)
}
