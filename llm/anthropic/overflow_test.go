package anthropic

import (
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A prompt over the window comes back as KindContextOverflow with the
// sizes the server stated, so the loop can trim by the right amount.
func TestContextOverflowStatesSizes(t *testing.T) {
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(llmtest.Text("never")), llmtest.WithMaxContextChars(50))
	defer srv.Close()
	c := New(Config{BaseURL: srv.URL, HTTPClient: srv.Client()})
	_, err := c.Complete(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage(strings.Repeat("long ", 100))}})
	var e *llm.Error
	if !errors.As(err, &e) || e.Kind != llm.KindContextOverflow || e.ContextLimit != 50 || e.ContextUsed <= 50 || e.StatusCode != 400 {
		t.Fatalf("%#v", err)
	}
}
