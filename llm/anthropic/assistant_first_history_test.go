package anthropic_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/anthropic"
	"github.com/valetkit/valet/llm/llmtest"
)

// A history whose first turn after the system prompt is the assistant's
// (a conversation the assistant opened: a scheduled task's greeting, or a
// window whose oldest user turn was trimmed) is valid for llm.Client and
// llm/openai; the Messages API requires the first message to be the
// user's, so the client must send something the API accepts.
func TestHistoryOpenedByTheAssistantIsAccepted(t *testing.T) {
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(llmtest.Text("ok")))
	defer srv.Close()
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL})
	_, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{
		llm.SystemMessage("persona"),
		llm.AssistantMessage("Good morning! Your daily report is ready."),
		llm.UserMessage("thanks, summarise it"),
	}})
	if err != nil {
		t.Fatalf("a history opened by the assistant: %v", err)
	}
}
