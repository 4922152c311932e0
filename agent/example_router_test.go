package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
)

// Models by name: the host says what "fast" and "smart" are, Config.Model
// picks the default, and a message asks for another. A name no client
// answers is refused when the orchestrator is built, or when a message
// names it.
func ExampleModelMap() {
	smart := llmtest.NewScript(llmtest.Text("A careful answer."))
	fast := llmtest.NewScript(llmtest.Text("A quick answer."))
	models := agent.ModelMap{"smart": smart, "fast": fast}

	_, err := agent.NewOrchestrator(agent.Config{Models: models, Model: "smrat"})
	fmt.Println(errors.Is(err, agent.ErrUnknownModel))

	o, err := agent.NewOrchestrator(agent.Config{Models: models, Model: "smart"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close(context.Background())
	for _, name := range []string{"fast", "", "huge"} {
		res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: "Hi", Model: name})
		if err != nil {
			fmt.Printf("%q: %v\n", name, err)
			continue
		}
		fmt.Printf("%q: %s\n", name, res.Response)
	}
	// Output:
	// true
	// "fast": A quick answer.
	// "": A careful answer.
	// "huge": agent: no client answers to the model name: "huge"
}
