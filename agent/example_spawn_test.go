package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// Sub-agents: the coordinator delegates a task with spawn_agent; the
// sub-agent sees only its worker prompt and the task, and its answer is
// the tool result the coordinator reads. Its steps reach the Observer
// marked with the spawn's call ID.
func ExampleSubAgentOptions() {
	const worker = "You research hotels. Answer with one name."
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		switch last := req.Messages[len(req.Messages)-1]; {
		case req.Messages[0].Content == worker: // the sub-agent
			return llmtest.Text("Hotel Lumen")
		case last.Role == llm.RoleTool: // the coordinator reads the result
			return llmtest.Text("Book " + strings.SplitN(last.Content, "\n", 2)[0] + "?")
		default:
			return llmtest.Calls(llm.ToolCall{ID: "research", Name: agent.SpawnAgentTool,
				Arguments: []byte(`{"task":"Find the best hotel in Lyon under 200 EUR."}`)})
		}
	})
	subSteps := 0
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:       model,
		SubAgents: agent.SubAgentOptions{Enabled: true, WorkerPrompt: worker},
		Observer: agent.ObserverFunc(func(_ context.Context, s agent.Step) {
			if len(s.Path) == 1 && s.Path[0] == "research" {
				subSteps++
			}
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close(context.Background())
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: "Find me a hotel in Lyon."})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Response)
	fmt.Println(res.ToolCalls[0].Name, res.ToolCalls[0].ResultStatus, subSteps > 0)
	// Output:
	// Book Hotel Lumen?
	// spawn_agent completed true
}
