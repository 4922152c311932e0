package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type CityIn struct {
	City string `json:"city" jsonschema:"description=City name"`
}

func ExampleOrchestrator_HandleMessage() {
	weather := tool.New("get_weather", "Current weather for a city",
		func(ctx context.Context, in CityIn) (string, error) {
			return "Sunny, 21°C in " + in.City, nil
		})
	// A scripted model: two weather calls at once, then an answer.
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`), llmtest.Call("get_weather", `{"city":"Rome"}`)),
		llmtest.Text("Both Paris and Rome are sunny."),
	)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:          model,
		SystemPrompt: "You are Koi, a concise assistant.",
		Tools:        []tool.Tool{weather},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: "c1", Text: "Paris or Rome this weekend?"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Response)
	fmt.Println(res.Status, "after", res.Turns, "model calls")
	for _, c := range res.ToolCalls {
		fmt.Println(c.Name, c.ArgsSummary, c.Success)
	}
	// Output:
	// Both Paris and Rome are sunny.
	// completed after 2 model calls
	// get_weather {"city":"Paris"} true
	// get_weather {"city":"Rome"} true
}

func ExampleOrchestrator_Stream() {
	weather := tool.New("get_weather", "Current weather for a city",
		func(ctx context.Context, in CityIn) (string, error) { return "Rain in " + in.City, nil })
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
		llmtest.Text("Take an umbrella."),
	)
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Tools: []tool.Tool{weather}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for ev, err := range o.Stream(context.Background(), agent.Message{TenantID: "u1", Text: "Oslo today?"}) {
		switch ev.Type {
		case agent.EventToolCallStart:
			fmt.Println("calling", ev.ToolCall.Name, ev.ToolCall.ArgsSummary)
		case agent.EventToolResult:
			fmt.Println("result of", ev.ToolCall.Name, "ok:", ev.ToolCall.Success)
		case agent.EventMessageChunk:
			fmt.Printf("[%s]", ev.Text)
		case agent.EventMessageEnd:
			fmt.Println()
		case agent.EventExecutionEnd:
			fmt.Println(ev.Result.Status, err)
		}
	}
	// Output:
	// calling get_weather {"city":"Oslo"}
	// result of get_weather ok: true
	// [Take][ an][ umbrella.]
	// completed <nil>
}

func ExampleHooks() {
	model := llmtest.NewScript(llmtest.Text("Hello!"))
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:    model,
		Logger: slog.New(slog.DiscardHandler),
		Hooks: agent.Hooks{
			ShouldProcess: func(ctx context.Context, m agent.Message) (bool, string, error) {
				if len(m.Text) > 1000 {
					return false, "That message is too long for me.", nil
				}
				return true, "", nil
			},
		},
		Loop: agent.LoopConfig{MaxTurns: 5, ToolTimeout: 10 * time.Second},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	long := make([]byte, 2000)
	for i := range long {
		long[i] = 'a'
	}
	res, _ := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: string(long)})
	fmt.Println(res.Status, "-", res.Response)
	res, _ = o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: "hi"})
	fmt.Println(res.Status, "-", res.Response)
	// Output:
	// refused - That message is too long for me.
	// completed - Hello!
}
