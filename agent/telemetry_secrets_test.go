package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type LookupIn struct {
	City   string `json:"city" jsonschema:"description=City"`
	APIKey string `json:"api_key,omitempty" jsonschema:"description=Key of the weather service"`
}

// With content capture on, a secret in the user's message, in a tool
// call's arguments, in a tool's result, in a tool's error and in the
// model's answer appears in no span attribute, event, link or status and
// in no metric attribute; the content around it is recorded.
func TestTracingNeverRecordsSecrets(t *testing.T) {
	secrets := []string{"Hunter2Zq9x", "sk-live-Ab12Cd34", "Tok3nXyz999", leakySecret}
	tp, rec := recorder(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	lookup := tool.New("lookup", "Weather lookup", func(ctx context.Context, in LookupIn) (string, error) {
		return "Sunny in " + in.City + "; session token=Tok3nXyz999", nil
	})
	fetch := tool.New("fetch", "Fetch something", func(ctx context.Context, in FetchIn) (string, error) {
		return "", errors.New(leakyText)
	})
	s := llmtest.NewScript(
		llmtest.Calls(
			llm.ToolCall{ID: "c1", Name: "lookup", Arguments: []byte(`{"city":"Paris","api_key":"sk-live-Ab12Cd34"}`)},
			llm.ToolCall{ID: "c2", Name: "fetch", Arguments: []byte(`{"what":"y"}`)},
		),
		llmtest.Text("Sunny in Paris. Noted your password: Hunter2Zq9x"),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{lookup, fetch}, TracerProvider: tp, MeterProvider: mp,
		Telemetry: agent.TelemetryOptions{CaptureContent: true}})
	if _, err := o.HandleMessage(context.Background(), msg("Weather in Paris? my password=Hunter2Zq9x")); err != nil {
		t.Fatal(err)
	}

	var all []string // every text telemetry holds
	kvs := func(where string, list []attribute.KeyValue) {
		for _, kv := range list {
			all = append(all, where+" "+string(kv.Key)+"="+kv.Value.Emit())
		}
	}
	for _, sp := range rec.Ended() {
		w := "span " + sp.Name()
		all = append(all, w, w+" status "+sp.Status().Description)
		kvs(w, sp.Attributes())
		for _, ev := range sp.Events() {
			all = append(all, w+" event "+ev.Name)
			kvs(w+" event "+ev.Name, ev.Attributes)
		}
		for _, l := range sp.Links() {
			kvs(w+" link", l.Attributes)
		}
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			var sets []attribute.Set
			switch d := m.Data.(type) {
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					sets = append(sets, p.Attributes)
				}
			default:
				t.Fatalf("metric %s of unexpected type %T", m.Name, m.Data)
			}
			for _, set := range sets {
				kvs("metric "+m.Name, set.ToSlice())
			}
		}
	}
	for _, text := range all {
		for _, sec := range secrets {
			if strings.Contains(text, sec) {
				t.Errorf("telemetry leaks %q: %s", sec, text)
			}
		}
	}
	// Content is recorded, masked.
	joined := strings.Join(all, "\n")
	for _, want := range []string{
		`gen_ai.tool.call.arguments={"api_key":"***","city":"Paris"}`,
		"gen_ai.tool.call.result=Sunny in Paris; session token=***",
		"gen_ai.input.messages=",
		"gen_ai.output.messages=",
		"my password=***",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("telemetry lacks %q:\n%s", want, joined)
		}
	}
	if t.Failed() {
		fmt.Println(joined)
	}
}
