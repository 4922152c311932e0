package agent_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Tracing a run with the OpenTelemetry SDK. In production the
// TracerProvider exports to a collector (sdktrace.WithBatcher with an OTLP
// exporter); here a SpanRecorder keeps the spans to print them.
func Example_tracing() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	weather := tool.New("get_weather", "Current weather for a city", func(ctx context.Context, in WeatherIn) (string, error) {
		return "Sunny in " + in.City, nil
	})
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`)),
		llmtest.Text("It is sunny in Paris."),
	)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:            model,
		Tools:          []tool.Tool{weather},
		TracerProvider: tp,
		Telemetry:      agent.TelemetryOptions{AgentName: "koi", ProviderName: "openai"},
	})
	if err != nil {
		panic(err)
	}
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: "c1", Text: "Weather in Paris?"}); err != nil {
		panic(err)
	}
	names := map[string]string{} // span ID -> name
	for _, s := range rec.Ended() {
		names[s.SpanContext().SpanID().String()] = s.Name()
	}
	for _, s := range rec.Ended() {
		parent := names[s.Parent().SpanID().String()]
		if parent == "" {
			parent = "(root)"
		}
		fmt.Printf("%-24s under %s\n", s.Name(), parent)
	}
	// Output:
	// chat llmtest             under invoke_agent koi
	// execute_tool get_weather under invoke_agent koi
	// chat llmtest             under invoke_agent koi
	// invoke_agent koi         under (root)
}
