package agent_test

import (
	"context"
	"fmt"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type TimeIn struct {
	City string `json:"city" jsonschema:"description=City name"`
}

// The first thing a bot builds: an Orchestrator from a Config whose zero
// fields mean their documented defaults (here an in-memory pool and
// memory). Only LLM is required; a scripted model from llm/llmtest stands
// in for openai.New(openai.Config{...}) so the example runs offline.
func Example() {
	localTime := tool.New("local_time", "The local time in a city",
		func(ctx context.Context, in TimeIn) (string, error) { return "09:30 in " + in.City, nil })
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("local_time", `{"city":"Tokyo"}`)),
		llmtest.Text("It is 09:30 in Tokyo."),
		llmtest.Text("You asked about Tokyo."),
	)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:          model,
		SystemPrompt: "You are Koi, a concise assistant.",
		Tools:        []tool.Tool{localTime},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for _, text := range []string{"What time is it in Tokyo?", "Which city did I ask about?"} {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "alice", ConversationID: "c1", Text: text})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s after %d model call(s): %s\n", res.Status, res.Turns, res.Response)
	}
	// The default memory kept the first exchange for the second message.
	fmt.Println("messages the last call saw:", len(model.Requests()[2].Messages))
	// Output:
	// completed after 2 model call(s): It is 09:30 in Tokyo.
	// completed after 1 model call(s): You asked about Tokyo.
	// messages the last call saw: 6
}
