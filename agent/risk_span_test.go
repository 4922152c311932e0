package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
)

// Each classified call's execute_tool span says its risk and what became
// of it.
func TestRiskOnToolSpans(t *testing.T) {
	tp, rec := recorder(t)
	sh := &shell{}
	s := llmtest.NewScript(llmtest.Calls(shellCall("c1", "ls"), shellCall("c2", "sudo ls")), llmtest.Text("Done."))
	o := riskOrch(t, s, agent.Config{TracerProvider: tp}, sh)
	if _, err := o.HandleMessage(context.Background(), msg("Look.")); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sp := range spansNamed(rec, "execute_tool shell") {
		id, _ := attr(sp, "gen_ai.tool.call.id")
		risk, _ := attr(sp, "valet.tool.risk")
		dec, _ := attr(sp, "valet.tool.risk.decision")
		got[id.AsString()] = risk.AsString() + "/" + dec.AsString()
	}
	if got["c1"] != "low/run" || got["c2"] != "critical/denied" {
		t.Fatalf("spans: %v", got)
	}
}
