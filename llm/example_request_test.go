package llm_test

import (
	"context"
	"fmt"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// The first thing code talking to a model builds: a Request of Messages,
// sent through a Client (llm/openai.New(openai.Config{...}) in production,
// a scripted llm/llmtest model here). A failure is told apart by its kind,
// never by its message.
func Example() {
	var client llm.Client = llmtest.NewScript(
		llmtest.Text("Bonjour !"),
		llmtest.Fail(&llm.Error{Kind: llm.KindRateLimited, StatusCode: 429, RetryAfter: 2 * time.Second}),
	)
	req := llm.Request{Messages: []llm.Message{
		llm.SystemMessage("You translate into French."),
		llm.UserMessage("Hello!"),
	}}
	ctx := context.Background()
	resp, err := client.Complete(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.FinishReason, resp.Message.Role, resp.Message.Content)

	_, err = client.Complete(ctx, req)
	switch llm.KindOf(err) {
	case llm.KindRateLimited:
		fmt.Println("rate limited; retry after", llm.RetryAfter(err), "retryable:", llm.IsRetryable(err))
	case llm.KindContextOverflow:
		fmt.Println("shorten the history")
	}
	// Output:
	// stop assistant Bonjour !
	// rate limited; retry after 2s retryable: true
}
