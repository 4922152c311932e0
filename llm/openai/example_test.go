package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/llm/openai"
)

// A local stand-in for an OpenAI-compatible server (Ollama, vLLM...): it
// answers with a tool call whose arguments come as a JSON object and whose
// id is empty, as some servers do, then streams a text answer.
func fakeServer() *httptest.Server {
	turn := 0
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		turn++
		if turn == 1 {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"model":"llama3.1","choices":[{"index":0,"finish_reason":"tool_calls",
				"message":{"role":"assistant","content":"","tool_calls":[{"id":"","type":"function",
				"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]}}],
				"usage":{"prompt_tokens":12,"completion_tokens":7}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Sunny"}}]}`,
			`{"choices":[{"index":0,"delta":{"content":" in Paris."}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"choices":[],"usage":{"prompt_tokens":30,"completion_tokens":4}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", d)
		}
	}))
}

func Example() {
	srv := fakeServer()
	defer srv.Close()

	c := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "llama3.1"}) // no key: a local server
	ctx := context.Background()
	weather := llm.ToolSpec{
		Name:       "get_weather",
		Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`),
	}
	msgs := []llm.Message{llm.UserMessage("Weather in Paris?")}

	resp, err := c.Complete(ctx, llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weather}})
	if err != nil {
		fmt.Println(err)
		return
	}
	call := resp.Message.ToolCalls[0]
	fmt.Println(resp.FinishReason, call.ID, call.Name, string(call.Arguments), resp.Usage.Total())

	msgs = append(msgs, resp.Message, llm.ToolResultMessage(call, "sunny, 24°C", false))
	for chunk, err := range c.Stream(ctx, llm.Request{Messages: msgs, Tools: []llm.ToolSpec{weather}}) {
		switch {
		case err != nil:
			fmt.Println("error:", err, llm.KindOf(err))
			return
		case chunk.Response != nil:
			fmt.Printf("\n%s %+v\n", chunk.Response.FinishReason, chunk.Response.Usage)
		default:
			fmt.Print(chunk.Text)
		}
	}
	// Output:
	// tool_calls call_0 get_weather {"city":"Paris"} 19
	// Sunny in Paris.
	// stop {InputTokens:30 OutputTokens:4 CacheReadTokens:0 CacheWriteTokens:0}
}

// Errors are classified by kind, whatever the server's error looks like.
func ExampleClient_Complete_errors() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Retry-After", "20")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
	}))
	defer srv.Close()

	c := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "sk-..."})
	_, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	fmt.Println(llm.KindOf(err), llm.IsRetryable(err), llm.RetryAfter(err))
	fmt.Println(err)
	// Output:
	// rate_limited true 20s
	// llm: rate_limited (429) [rate_limit_exceeded]: Rate limit reached
}

// Embed turns texts into vectors, here from the fake OpenAI server.
func ExampleClient_Embed() {
	srv := llmtest.NewServer(llmtest.NewScript(), llmtest.WithEmbedder(llmtest.NewEmbedder(4)))
	defer srv.Close()

	c := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "sk-...", EmbeddingModel: "text-embedding-3-small"})
	vecs, err := c.Embed(context.Background(), []string{"The user's dentist is Dr. Kim.", "Who fixes my teeth?"})
	fmt.Println(len(vecs), len(vecs[0]), err)
	// Output:
	// 2 4 <nil>
}
