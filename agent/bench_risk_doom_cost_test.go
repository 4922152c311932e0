package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// BenchmarkRiskDoomCost runs BenchmarkConversation's workload (5 turns × 3
// parallel calls, a fresh conversation each time) as separate
// sub-benchmarks, one loop each, so that an instruction counter can run one
// side alone at a fixed count of conversations:
//
//   - bare: the hand-written loop (BenchmarkConversation/bare);
//   - nodoom: valet with LoopConfig.NoDoomLoop (the risk check by the
//     tools' declared risk, no doom-loop detector);
//   - valet: valet's defaults (BenchmarkConversation/valet: risk check and
//     doom-loop detector on);
//   - policy: valet's defaults and a RiskPolicy returning the declared
//     risk (a policy call per tool call).
//
// The per-conversation instruction counts in README's performance section
// come from running each side under valgrind at two counts and dividing
// the difference (the process's start and the benchmark's setup cancel):
//
//	go test -c -o /tmp/agent.test ./agent/
//	GOMAXPROCS=1 valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p /tmp/agent.test \
//	    -test.run '^$' -test.bench 'BenchmarkRiskDoomCost/valet$' -test.benchtime 200x
//
// (and 1200x; instructions per conversation = (I(1200) − I(200)) / 1000).
func BenchmarkRiskDoomCost(b *testing.B) {
	b.Run("bare", runBare)
	for _, v := range []struct {
		name string
		loop agent.LoopConfig
	}{
		{"nodoom", agent.LoopConfig{NoDoomLoop: true}},
		{"valet", agent.LoopConfig{}},
		{"policy", agent.LoopConfig{RiskPolicy: func(_ context.Context, _ llm.ToolCall, declared tool.Risk) (tool.Risk, error) {
			return declared, nil
		}}},
	} {
		b.Run(v.name, func(b *testing.B) {
			model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
			o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.",
				Tools: benchTools(), Loop: v.loop})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
			b.ReportAllocs()
			for b.Loop() {
				res, err := o.HandleMessage(ctx, m)
				checkValet(b, res, err, benchTurns, benchCalls)
				if err := o.Forget(ctx, m.TenantID, m.ConversationID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
