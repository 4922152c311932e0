package mcptool

import (
	"context"
	"log/slog"
	"slices"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Through agent.Config.ToolSources: a list the server changes during a
// run reaches the model in the next run, without the tool that changed
// (held back) and with the tool that appeared.
func TestServerListChangeReachesNextRun(t *testing.T) {
	s := connect(t, helperServer("t"), Config{})
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("t_rugpull", `{}`)),
		llmtest.Text("done"),
		llmtest.Text("again"),
	)
	// The helper's tools have no annotations, so they are high risk and
	// would wait for approval: this test is about the list, so every
	// call runs.
	lowRisk := func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error) { return tool.RiskLow, nil }
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, ToolSources: []agent.ToolSource{s}, Logger: slog.New(slog.DiscardHandler), Loop: agent.LoopConfig{RiskPolicy: lowRisk}})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	msg := agent.Message{TenantID: "u1", ConversationID: "c1", Text: "change"}
	if res, err := o.HandleMessage(context.Background(), msg); err != nil || !res.ToolCalls[0].Success {
		t.Fatalf("run 1: %+v, %v", res, err)
	}
	waitTools(t, s, func(n []string) bool { return slices.Contains(n, "t_newcomer") })
	msg.Text = "again"
	if _, err := o.HandleMessage(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	names := func(specs []llm.ToolSpec) (out []string) {
		for _, sp := range specs {
			out = append(out, sp.Name)
		}
		return out
	}
	reqs := model.Requests()
	first, second, third := names(reqs[0].Tools), names(reqs[1].Tools), names(reqs[2].Tools)
	if !slices.Contains(first, "t_echo") || slices.Contains(first, "t_newcomer") || !slices.Equal(first, second) {
		t.Fatalf("run 1 offered %v then %v; want the list of its start both times", first, second)
	}
	if slices.Contains(third, "t_echo") || !slices.Contains(third, "t_newcomer") {
		t.Fatalf("run 2 offered %v; want t_newcomer and not the changed t_echo", third)
	}
}
