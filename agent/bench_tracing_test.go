package agent_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/valetkit/valet/agent"
)

// discardExporter is a span exporter that does nothing.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracing/ratio measures the conversation of
// BenchmarkConversation without telemetry, with an SDK TracerProvider
// whose exporter does nothing (spans are built, ended and handed to it
// synchronously), with that and an SDK MeterProvider (a manual reader,
// never collected), and with an Observer that does nothing, in
// interleaved blocks of one run:
//
//	go test -run '^$' -bench BenchmarkTracing -benchtime 2s ./agent/
//
// x-trace (wall), x-trace-cpu, x-trace-allocs, x-trace-bytes = traced /
// none; x-metrics for tracing and metrics; x-noop for the no-op Observer.
func BenchmarkTracing(b *testing.B) {
	b.Run("ratio", func(b *testing.B) {
		model := newBenchModel(benchTurns, benchCalls, "get_weather", "web_search", "calculator")
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(discardExporter{}))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()
		newO := func(cfg agent.Config) *agent.Orchestrator {
			cfg.LLM, cfg.SystemPrompt, cfg.Tools, cfg.Logger = model, "You are a benchmark.", benchTools(), benchLog
			o, err := agent.NewOrchestrator(cfg)
			if err != nil {
				b.Fatal(err)
			}
			return o
		}
		noop := agent.ObserverFunc(func(context.Context, agent.Step) {})
		m := agent.Message{TenantID: "bench", ConversationID: "c", Text: benchText}
		side := func(name string, cfg agent.Config) side {
			return valetSide(b, name, newO(cfg), model, m, m.ConversationID, 0, agent.DefaultMaxHistoryMessages)
		}
		t := interleave(b, 100,
			side("none", agent.Config{}),
			side("trace", agent.Config{TracerProvider: tp}),
			side("metrics", agent.Config{TracerProvider: tp, MeterProvider: mp}),
			side("noop", agent.Config{Observer: noop}),
		)
		reportGOMAXPROCS(b)
		reportSide(b, "none-", t[0])
		reportSide(b, "trace-", t[1])
		reportSide(b, "metrics-", t[2])
		reportSide(b, "noop-", t[3])
		reportRatios(b, "x-trace", "x-trace-", t[1], t[0], true)
		reportRatios(b, "x-metrics", "x-metrics-", t[2], t[0], true)
		reportRatios(b, "x-noop", "x-noop-", t[3], t[0], true)
	})
}
