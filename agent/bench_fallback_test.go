package agent_test

import (
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
)

// BenchmarkFallback/ratio measures the conversation of
// BenchmarkConversation with the model called directly and through an
// llm.Fallback whose primary is that model (it always answers: no switch,
// only the wrapper and its per-conversation stickiness), in interleaved
// blocks of one run:
//
//	go test -run '^$' -bench BenchmarkFallback -benchtime 2s ./agent/
//
// x-fallback (wall), x-fallback-cpu, x-fallback-allocs, x-fallback-bytes =
// through the Fallback / direct.
func BenchmarkFallback(b *testing.B) {
	b.Run("ratio", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		spare := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		fb, err := llm.NewFallback(llm.FallbackConfig{Primary: model, Fallbacks: []llm.Client{spare}})
		if err != nil {
			b.Fatal(err)
		}
		newO := func(c llm.Client) *agent.Orchestrator {
			o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: c, SystemPrompt: "You are a benchmark.", Tools: benchTools()})
			if err != nil {
				b.Fatal(err)
			}
			return o
		}
		m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
		t := interleave(b, 100,
			valetSide(b, "direct", newO(model), model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
			valetSide(b, "fallback", newO(fb), model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		)
		if spare.sent.Load() != 0 {
			b.Fatal("the fallback model was called")
		}
		reportGOMAXPROCS(b)
		reportSide(b, "direct-", t[0])
		reportSide(b, "fallback-", t[1])
		reportRatios(b, "x-fallback", "x-fallback-", t[1], t[0], true)
	})
}
