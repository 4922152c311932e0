package agent_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A sub-agent runs the tools of the run's ToolSources it is offered.
func TestSpawnAgentRunsSourceTools(t *testing.T) {
	var runs atomic.Int32
	src := &listSource{}
	src.set(countingTool("mcp_search", &runs))
	var result llm.Message
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			if r, ok := toolResults(req)["q"]; ok {
				result = r
				return llmtest.Text("found")
			}
			return llmtest.Calls(llm.ToolCall{ID: "q", Name: "mcp_search", Arguments: []byte(`{}`)})
		}
		if len(toolResults(req)) > 0 {
			return llmtest.Text("ok")
		}
		return llmtest.Calls(spawnCall("sp", map[string]any{"task": "Search."}))
	})
	o := newOrch(t, model, agent.Config{ToolSources: []agent.ToolSource{src}, SubAgents: subAgents(agent.SubAgentOptions{})})
	if _, err := o.HandleMessage(context.Background(), msg("Go.")); err != nil {
		t.Fatal(err)
	}
	if runs.Load() != 1 || result.IsError {
		t.Fatalf("runs %d, result %+v", runs.Load(), result)
	}
}
