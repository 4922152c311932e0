package agent_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// BenchmarkSpawnAgent measures sub-agents (Config.SubAgents):
//
//	go test -run '^$' -bench BenchmarkSpawnAgent ./agent/
//
// "offered": BenchmarkConversation/valet's workload (5 turns × 3 parallel
// calls) with spawn_agent offered but never called, against the same
// without it, in interleaved blocks of one run: off-/on- ns/conv,
// allocs/conv, B/conv per side and x-time, x-allocs, x-bytes (on / off).
//
// "parallel": a coordinator gives 5 sub-agents one model call each, on a
// model whose sub-agent calls take spawnLatency (the coordinator's none):
// all 5 in one reply (concurrent) against one per reply (sequential).
// x-ideal-conc is the concurrent wall time over spawnLatency (ideal 1),
// x-ideal-seq the sequential one over 5 × spawnLatency (ideal 1), and
// x-speedup sequential / concurrent (ideal 5).
func BenchmarkSpawnAgent(b *testing.B) {
	b.Run("offered", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		cfg := agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools()}
		off, err := agent.NewOrchestrator(cfg)
		if err != nil {
			b.Fatal(err)
		}
		cfg.SubAgents.Enabled = true
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
	})
	b.Run("parallel", func(b *testing.B) {
		conc, seq := spawnSide(b, true), spawnSide(b, false)
		var tc, ts time.Duration
		for b.Loop() {
			tc += conc()
			ts += seq()
		}
		n := float64(b.N)
		b.ReportMetric(float64(tc)/n, "conc-ns/op")
		b.ReportMetric(float64(ts)/n, "seq-ns/op")
		b.ReportMetric(float64(tc)/n/float64(spawnLatency), "x-ideal-conc")
		b.ReportMetric(float64(ts)/n/float64(5*spawnLatency), "x-ideal-seq")
		b.ReportMetric(float64(ts)/float64(tc), "x-speedup")
	})
}

const spawnLatency = 20 * time.Millisecond

// spawnSide returns a func that runs one message whose coordinator starts
// 5 sub-agents, all in one reply (concurrent) or one per reply, and
// returns its wall time.
func spawnSide(b *testing.B, concurrent bool) func() time.Duration {
	const n = 5
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return llmtest.Reply{Text: "done", Delay: spawnLatency}
		}
		got := len(toolResults(req))
		switch {
		case got == n:
			return llmtest.Text("all done")
		case concurrent:
			calls := make([]llm.ToolCall, n)
			for i := range calls {
				calls[i] = spawnCall(fmt.Sprint("s", i), map[string]any{"task": fmt.Sprint("task ", i)})
			}
			return llmtest.Calls(calls...)
		default:
			return llmtest.Calls(spawnCall(fmt.Sprint("s", got), map[string]any{"task": fmt.Sprint("task ", got)}))
		}
	})
	o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model,
		SubAgents: agent.SubAgentOptions{Enabled: true, WorkerPrompt: workerPrompt}})
	if err != nil {
		b.Fatal(err)
	}
	m := agent.Message{TenantID: "bench", ConversationID: "spawn", Text: "Do five things."}
	return func() time.Duration {
		t0 := time.Now()
		res, err := o.HandleMessage(context.Background(), m)
		d := time.Since(t0)
		if err != nil || res.Response != "all done" || len(res.ToolCalls) != n {
			b.Fatalf("res %+v, err %v", res, err)
		}
		if err := o.Forget(context.Background(), m.TenantID, m.ConversationID); err != nil {
			b.Fatal(err)
		}
		return d
	}
}
