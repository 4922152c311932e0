package llmtest_test

import (
	"context"
	"fmt"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type CityIn struct {
	City string `json:"city"`
}

// The first thing a bot's test builds: a scripted model handed to the
// orchestrator as its LLM, in place of llm/openai. In a test, write
// llmtest.NewStrictScript(t, ...), which also fails the test on a call
// with no reply left or a reply never used; the script records every
// request, so the test checks what the bot sent as well as what it did.
func Example() {
	weather := tool.New("get_weather", "Current weather for a city",
		func(ctx context.Context, in CityIn) (string, error) { return "rain in " + in.City, nil })
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Text("Take an umbrella."),
	)
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Tools: []tool.Tool{weather}})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: "Oslo today?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Response)
	for i, req := range model.Requests() {
		last := req.Messages[len(req.Messages)-1]
		fmt.Printf("call %d (%s) ended with %s: %q\n", i+1, req.Purpose, last.Role, last.Content)
	}
	fmt.Println("replies left:", model.Remaining(), "errors:", model.Err())
	// Output:
	// Take an umbrella.
	// call 1 (loop) ended with user: "Oslo today?"
	// call 2 (loop) ended with tool: "rain in Oslo"
	// replies left: 0 errors: <nil>
}
