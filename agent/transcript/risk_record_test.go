package transcript_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A classified call's risk step is recorded with the call, its risk and
// what became of it.
func TestTranscriptRecordsRiskDecisions(t *testing.T) {
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("weather", `{"city":"Paris"}`)), llmtest.Text("No."))
	weather := tool.New("weather", "Weather of a city", func(ctx context.Context, in cityIn) (string, error) { return "sunny", nil })
	var out syncBuffer
	obs := newObserver(t, transcript.Config{Writer: &out})
	policy := func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error) { return tool.RiskCritical, nil }
	o := newOrch(t, s, obs, agent.Config{Tools: []tool.Tool{weather}, Loop: agent.LoopConfig{RiskPolicy: policy}})
	if _, err := o.HandleMessage(context.Background(), msg("Weather?")); err != nil {
		t.Fatal(err)
	}
	flush(t, obs)
	recs, err := transcript.Read(strings.NewReader(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range recs {
		if r.Kind == agent.StepRisk {
			found = r.Risk == "critical" && r.RiskDecision == "denied" && r.ToolCall != nil && r.ToolCall.Name == "weather"
		}
	}
	if !found {
		t.Fatalf("no risk record:\n%s", out.String())
	}
}
