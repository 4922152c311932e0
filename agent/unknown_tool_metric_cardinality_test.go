package agent_test

import (
	"context"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Tool names the model makes up (a hallucination, or text a hostile page
// planted) are not tools: they must not each open a metric series, or a
// model can grow the metric backend's series without bound. With one
// tool configured, the tool metrics hold at most that tool plus one
// series for every unknown name.
func TestUnknownToolNamesDoNotOpenMetricSeries(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	var calls []llm.ToolCall
	for i := range 20 {
		calls = append(calls, llm.ToolCall{ID: fmt.Sprint("c", i), Name: fmt.Sprintf("made_up_%d", i), Arguments: []byte(`{}`)})
	}
	s := llmtest.NewScript(llmtest.Reply{ToolCalls: calls}, llmtest.Reply{Text: "Done."})
	o := newOrch(t, s, agent.Config{
		Tools:         []tool.Tool{weatherTool()},
		MeterProvider: mp,
	})
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "acme", ConversationID: "c1", Text: "Go"}); err != nil {
		t.Fatal(err)
	}
	ms := collect(t, reader)
	names := map[string]bool{}
	for _, dp := range ms["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		names[value(dp.Attributes, "gen_ai.tool.name")] = true
	}
	for _, dp := range ms["valet.tool.errors"].Data.(metricdata.Sum[int64]).DataPoints {
		names[value(dp.Attributes, "gen_ai.tool.name")] = true
	}
	if len(names) > 2 {
		t.Fatalf("20 made-up tool names gave %d gen_ai.tool.name values on the tool metrics (want at most 2: the configured tool and one for unknown names): %v", len(names), names)
	}
}
