package agent_test

import (
	"testing"

	"github.com/valetkit/valet/agent"
)

// BenchmarkPlanDoom measures what the planning tool offered but unused
// (Config.Plan) and the doom-loop detector (on by default) cost on
// BenchmarkConversation/valet's workload (5 turns × 3 parallel calls),
// against the same with both off, in interleaved blocks of one run:
// off-/on- ns/conv, allocs/conv, B/conv per side and x-time, x-allocs,
// x-bytes (on / off):
//
//	go test -run '^$' -bench BenchmarkPlanDoom -benchtime 2s ./agent/
func BenchmarkPlanDoom(b *testing.B) {
	model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
	cfg := agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools(),
		Loop: agent.LoopConfig{NoDoomLoop: true}}
	off, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Plan.Enabled, cfg.Loop.NoDoomLoop = true, false
	on, err := agent.NewOrchestrator(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
	t := interleave(b, 100,
		valetSide(b, "off", off, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		valetSide(b, "on", on, model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
	)
	reportSide(b, "off-", t[0])
	reportSide(b, "on-", t[1])
	reportRatios(b, "x-time", "x-", t[1], t[0], true)
}
