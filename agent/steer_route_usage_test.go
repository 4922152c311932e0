package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// The classification call that routes a message to the running loop is
// a model call like any other: the routed message's Result reports its
// tokens (the host bills and budgets from Result.Usage).
func TestRoutedMessageReportsTheClassificationUsage(t *testing.T) {
	g := newGate()
	route := llmtest.Text("correction")
	route.Usage = llm.Usage{InputTokens: 321, OutputTokens: 1}
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Done."),
	).On(llm.PurposeRoute, route)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}, Loop: routing})
	done := start(o, msg("Measure the room"))
	<-g.started
	res, err := o.HandleMessage(context.Background(), msg("in metric units, please"))
	close(g.release)
	<-done
	if err != nil || res.Status != agent.StatusInjected {
		t.Fatalf("status %s, err %v", res.Status, err)
	}
	if res.Usage.InputTokens != 321 || res.Usage.OutputTokens != 1 {
		t.Fatalf("routed message's usage %+v; want the classification call's 321/1 tokens", res.Usage)
	}
}
