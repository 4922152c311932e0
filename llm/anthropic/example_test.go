package anthropic_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/anthropic"
	"github.com/valetkit/valet/llm/llmtest"
)

// A tool round trip against llmtest's fake Messages API: the model calls
// two tools at once, their results go back in one user turn, and the second
// call reads the prompt the first wrote to the cache.
func Example() {
	model := llmtest.NewScript(
		llmtest.Calls(
			llmtest.Call("get_weather", map[string]string{"city": "Paris"}),
			llmtest.Call("get_weather", map[string]string{"city": "Oslo"}),
		),
		llmtest.Text("Sunny in Paris, rain in Oslo."),
	)
	srv := llmtest.NewAnthropicServer(model, llmtest.WithAPIKey("sk-ant-example"))
	defer srv.Close()

	c := anthropic.New(anthropic.Config{APIKey: "sk-ant-example", BaseURL: srv.URL, HTTPClient: srv.Client()})
	ctx := context.Background()
	weather := llm.ToolSpec{
		Name:       "get_weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
	}
	msgs := []llm.Message{llm.SystemMessage("You answer in one sentence."), llm.UserMessage("Weather in Paris and Oslo?")}

	resp, err := c.Complete(ctx, llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weather}})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, tc := range resp.Message.ToolCalls {
		fmt.Println(resp.FinishReason, tc.Name, string(tc.Arguments))
	}
	fmt.Printf("cache: wrote %d, read %d\n", resp.Usage.CacheWriteTokens, resp.Usage.CacheReadTokens)

	msgs = append(msgs, resp.Message,
		llm.ToolResultMessage(resp.Message.ToolCalls[0], "sunny, 24°C", false),
		llm.ToolResultMessage(resp.Message.ToolCalls[1], "rain, 9°C", false))
	final, err := llm.Collect(c.Stream(ctx, llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weather}}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(final.FinishReason, final.Message.Content)
	fmt.Printf("cache: read %d of %d input tokens\n", final.Usage.CacheReadTokens, final.Usage.InputTokens)
	// Output:
	// tool_calls get_weather {"city":"Paris"}
	// tool_calls get_weather {"city":"Oslo"}
	// cache: wrote 40, read 0
	// stop Sunny in Paris, rain in Oslo.
	// cache: read 40 of 115 input tokens
}
