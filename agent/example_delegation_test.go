package agent_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// Background work: the coordinator starts a two-task graph (research, then
// a summary that refers to the research's result) and answers at once;
// the host runs the engine with the orchestrator's TaskExecutor, and when
// the graph ends its results arrive in the conversation as a new message,
// whose answer OnBackground hands to the host.
func ExampleOrchestrator_TaskExecutor() {
	const worker = "You are a worker."
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case req.Messages[0].Content == worker && strings.Contains(last.Content, "Research"):
			return llmtest.Text("Casa Azul, 120 EUR.")
		case req.Messages[0].Content == worker:
			return llmtest.Text("Summary: book Casa Azul.")
		case strings.HasPrefix(last.Content, "[Background Tasks]"):
			return llmtest.Text("Done in the background: book Casa Azul?")
		case last.Role == llm.RoleTool:
			return llmtest.Text("I am on it.")
		default:
			return llmtest.Calls(llm.ToolCall{ID: "bg", Name: agent.SpawnAgentTool, Arguments: []byte(`{"tasks":[
				{"id":"research","task":"Research hotels in Lisbon."},
				{"id":"summary","task":"Summarise for the user.","context":"[agent_result:research]","depends_on":["research"]}]}`)})
		}
	})
	eng, err := delegate.NewMemory(delegate.MemoryConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	delivered := make(chan string, 1)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM: model,
		SubAgents: agent.SubAgentOptions{Enabled: true, WorkerPrompt: worker, Engine: eng,
			OnBackground: func(_ context.Context, res *agent.Result) { delivered <- res.Response }},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close(context.Background())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- eng.Run(ctx, o.TaskExecutor()) }()
	defer func() { stop(); <-done }()

	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: "Find me a hotel in Lisbon."})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Response)
	fmt.Println(<-delivered)
	// Output:
	// I am on it.
	// Done in the background: book Casa Azul?
}
