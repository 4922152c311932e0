package llmtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

func ExampleScript() {
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", map[string]string{"city": "Paris"})),
		llmtest.Text("It is sunny in Paris."),
	)
	ctx := context.Background()
	msgs := []llm.Message{llm.UserMessage("What's the weather in Paris?")}

	// First turn: the model asks for a tool.
	resp, _ := model.Complete(ctx, llm.Request{Messages: msgs})
	call := resp.Message.ToolCalls[0]
	fmt.Println(resp.FinishReason, call.ID, call.Name, string(call.Arguments))

	// Second turn: the tool result goes back, the model answers.
	msgs = append(msgs, resp.Message, llm.ToolResultMessage(call, "sunny, 24°C", false))
	resp, _ = model.Complete(ctx, llm.Request{Messages: msgs})
	fmt.Println(resp.FinishReason, resp.Message.Content)

	// The script recorded what the bot sent.
	fmt.Println(model.Calls(), "calls; the second had", len(model.Requests()[1].Messages), "messages")

	// A third call has nothing left to answer with.
	_, err := model.Complete(ctx, llm.Request{Messages: msgs})
	fmt.Println(err)
	// Output:
	// tool_calls call_1 get_weather {"city":"Paris"}
	// stop It is sunny in Paris.
	// 2 calls; the second had 3 messages
	// llmtest: script exhausted: call 3 had no reply (2 scripted)
}

func ExampleNewServer() {
	model := llmtest.NewScript(llmtest.Text("Hello from the fake API."), llmtest.Text("Hello again."))
	srv := llmtest.NewServer(model, llmtest.WithAPIKey("sk-test"))
	defer srv.Close()

	// The first request meets an injected rate limit, the second is served.
	srv.Inject(llmtest.RateLimited(2 * time.Second))
	for range 2 {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}]}`
		req, _ := http.NewRequest("POST", srv.URL+"/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test")
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		var out struct {
			Choices []struct {
				Message struct{ Content string }
			}
			Error struct{ Code string }
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Println(resp.StatusCode, out.Error.Code, "retry after", resp.Header.Get("Retry-After"))
			continue
		}
		fmt.Println(resp.StatusCode, out.Choices[0].Message.Content)
	}
	fmt.Println(len(srv.Requests()), "requests,", model.Calls(), "reached the model")
	// Output:
	// 429 rate_limit_exceeded retry after 2
	// 200 Hello from the fake API.
	// 2 requests, 1 reached the model
}
