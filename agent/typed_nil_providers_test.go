package agent_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
)

// A provider that is set only when telemetry is enabled is a nil
// *sdktrace.TracerProvider otherwise:
//
//	var tp *sdktrace.TracerProvider
//	if cfg.Tracing { tp = sdktrace.NewTracerProvider(...) }
//	agent.NewOrchestrator(agent.Config{TracerProvider: tp, ...})
//
// NewOrchestrator takes such a nil as none (or rejects it with an error,
// as it does other bad input); it does not panic.
func TestTypedNilProvidersDoNotPanic(t *testing.T) {
	for name, cfg := range map[string]agent.Config{
		"tracer": {TracerProvider: (*sdktrace.TracerProvider)(nil)},
		"meter":  {MeterProvider: (*sdkmetric.MeterProvider)(nil)},
	} {
		t.Run(name, func(t *testing.T) {
			cfg.LLM = llmtest.NewScript(llmtest.Text("Hi."))
			defer func() {
				if v := recover(); v != nil {
					t.Fatalf("panicked: %v", v)
				}
			}()
			o, err := agent.NewOrchestrator(cfg)
			if err != nil {
				return // rejected: fine
			}
			if _, err := o.HandleMessage(context.Background(), msg("Hi")); err != nil {
				t.Fatal(err)
			}
		})
	}
}
