package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
)

// BenchmarkObserver/ratio measures the conversation of
// BenchmarkConversation without an Observer, with one that does nothing,
// and with a do-nothing observer behind NewAsyncObserver (which copies
// every step), in interleaved blocks of one run:
//
//	go test -run '^$' -bench BenchmarkObserver -benchtime 2s ./agent/
//
// x-noop (wall), x-noop-cpu, x-noop-allocs, x-noop-bytes = no-op observer /
// none; x-async likewise for the async one.
func BenchmarkObserver(b *testing.B) {
	b.Run("ratio", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		newO := func(obs agent.Observer) *agent.Orchestrator {
			o, err := agent.NewOrchestrator(agent.Config{Logger: benchLog, LLM: model, SystemPrompt: "You are a benchmark.", Tools: benchTools(), Observer: obs})
			if err != nil {
				b.Fatal(err)
			}
			return o
		}
		noop := agent.ObserverFunc(func(context.Context, agent.Step) {})
		async, err := agent.NewAsyncObserver(noop, agent.AsyncObserverConfig{})
		if err != nil {
			b.Fatal(err)
		}
		m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
		t := interleave(b, 100,
			valetSide(b, "none", newO(nil), model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
			valetSide(b, "noop", newO(noop), model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
			valetSide(b, "async", newO(async), model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages),
		)
		if err := async.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		reportGOMAXPROCS(b)
		reportSide(b, "none-", t[0])
		reportSide(b, "noop-", t[1])
		reportSide(b, "async-", t[2])
		reportRatios(b, "x-noop", "x-noop-", t[1], t[0], true)
		reportRatios(b, "x-async", "x-async-", t[2], t[0], true)
	})
}
