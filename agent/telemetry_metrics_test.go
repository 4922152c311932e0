package agent_test

import (
	"context"
	"errors"
	"math"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// collect reads every metric of the reader, by name.
func collect(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func value(set attribute.Set, k string) string {
	v, _ := set.Value(attribute.Key(k))
	return v.Emit()
}

// The metrics of a run: token usage per type equals Result.Usage, one
// operation duration per model call attempt (the failed one with
// error.type), one tool duration per tool call and one error for the
// failed one, and the run's cost by tenant equals Result.Consumed.CostUSD.
func TestMetricsOfARun(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	broken := tool.New("broken", "Always fails", func(ctx context.Context, in WeatherIn) (string, error) {
		return "", errors.New("backend down")
	})
	s := llmtest.NewScript(
		llmtest.Fail(&llm.Error{Kind: llm.KindUnavailable, Message: "503"}),
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			{ID: "a", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)},
			{ID: "b", Name: "broken", Arguments: []byte(`{"city":"Rome"}`)},
		}, Usage: llm.Usage{InputTokens: 1000, OutputTokens: 40}},
		llmtest.Reply{Text: "Done.", Usage: llm.Usage{InputTokens: 1200, OutputTokens: 5}},
	)
	o := newOrch(t, s, agent.Config{
		Tools:         []tool.Tool{weatherTool(), broken},
		MeterProvider: mp,
		Prices:        agent.Prices{llmtest.ModelName: {InputPerMillion: 1000, OutputPerMillion: 2000}},
		Loop:          agent.LoopConfig{LLMRetryBaseDelay: 1},
	})
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "acme", ConversationID: "c1", Text: "Go"})
	if err != nil {
		t.Fatal(err)
	}
	ms := collect(t, reader)

	tokens := ms["gen_ai.client.token.usage"].Data.(metricdata.Histogram[int64])
	sums := map[string]int64{}
	for _, dp := range tokens.DataPoints {
		sums[value(dp.Attributes, "gen_ai.token.type")] += dp.Sum
		if value(dp.Attributes, "gen_ai.operation.name") != "chat" || value(dp.Attributes, "gen_ai.request.model") != llmtest.ModelName {
			t.Fatalf("token point attributes %v", dp.Attributes.ToSlice())
		}
	}
	if sums["input"] != int64(res.Usage.InputTokens) || sums["output"] != int64(res.Usage.OutputTokens) || res.Usage.InputTokens != 2200 {
		t.Fatalf("token sums %v, Result.Usage %+v", sums, res.Usage)
	}
	if ms["gen_ai.client.token.usage"].Unit != "{token}" || ms["gen_ai.client.operation.duration"].Unit != "s" {
		t.Fatalf("units %q %q", ms["gen_ai.client.token.usage"].Unit, ms["gen_ai.client.operation.duration"].Unit)
	}

	var calls, failed uint64
	for _, dp := range ms["gen_ai.client.operation.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		calls += dp.Count
		if value(dp.Attributes, "error.type") == "unavailable" {
			failed += dp.Count
		}
	}
	if calls != 3 || failed != 1 {
		t.Fatalf("operation durations: %d calls, %d failed; want 3 and 1", calls, failed)
	}

	toolCalls := map[string]uint64{}
	for _, dp := range ms["gen_ai.execute_tool.duration"].Data.(metricdata.Histogram[float64]).DataPoints {
		toolCalls[value(dp.Attributes, "gen_ai.tool.name")+"/"+value(dp.Attributes, "error.type")] += dp.Count
	}
	if toolCalls["get_weather/"] != 1 || toolCalls["broken/tool_error"] != 1 || len(toolCalls) != 2 {
		t.Fatalf("tool durations %v", toolCalls)
	}
	errs := ms["valet.tool.errors"].Data.(metricdata.Sum[int64])
	if len(errs.DataPoints) != 1 || errs.DataPoints[0].Value != 1 || value(errs.DataPoints[0].Attributes, "gen_ai.tool.name") != "broken" {
		t.Fatalf("tool errors %+v", errs.DataPoints)
	}

	cost := ms["valet.cost.usd"].Data.(metricdata.Sum[float64])
	if len(cost.DataPoints) != 1 || value(cost.DataPoints[0].Attributes, "valet.tenant.id") != "acme" {
		t.Fatalf("cost points %+v", cost.DataPoints)
	}
	if got, want := cost.DataPoints[0].Value, res.Consumed.CostUSD; want == 0 || math.Abs(got-want) > 1e-12 {
		t.Fatalf("cost %v, Result.Consumed.CostUSD %v", got, want)
	}
}
