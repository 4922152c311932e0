package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A failing PrepareContext hook returns before r.end: the user message
// stays committed and keepHistory never runs, so the history grows past
// MaxHistoryMessages with every message (and holds consecutive user turns).
func TestFailingHookBoundsHistory(t *testing.T) {
	o, _ := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(),
		Loop: agent.LoopConfig{MaxHistoryMessages: 4},
		Hooks: agent.Hooks{PrepareContext: func(context.Context, agent.Message, []llm.Message) ([]llm.Message, error) {
			return nil, errors.New("memory backend down")
		}}})
	for range 50 {
		_, _ = o.HandleMessage(context.Background(), agent.Message{TenantID: "t", ConversationID: "c", Text: "hi"})
	}
	h, _ := o.History(context.Background(), "t", "c")
	if len(h) > 4 {
		t.Errorf("history holds %d messages, MaxHistoryMessages is 4", len(h))
	}
}
