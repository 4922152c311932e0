package llm_test

import (
	"context"
	"fmt"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A primary model that is overloaded and a second one to answer instead.
// The switch is reported to the ctx's hook (valet's orchestrator sets one
// that logs, observes and traces it), and Response.Model says who answered.
func ExampleNewFallback() {
	overloaded := &llm.Error{Kind: llm.KindUnavailable, StatusCode: 529, Message: "overloaded"}
	primary := llmtest.NewScript(llmtest.Fail(overloaded), llmtest.Fail(overloaded))
	backup := llmtest.NewScript(llmtest.Text("Hello from the backup."))
	chain, err := llm.NewFallback(llm.FallbackConfig{
		Primary:    primary,
		Fallbacks:  []llm.Client{backup},
		Names:      []string{"claude", "gpt"},
		RetryDelay: 1, // one retry of the primary, at once
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := llm.WithSwitchHook(context.Background(), func(s llm.Switch) {
		fmt.Printf("%s → %s: %s\n", s.From, s.To, llm.KindOf(s.Err))
	})
	resp, err := chain.Complete(ctx, llm.Request{Messages: []llm.Message{llm.UserMessage("Hi")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Message.Content, "primary calls:", primary.Calls())

	_, err = llm.NewFallback(llm.FallbackConfig{Primary: primary, Fallbacks: []llm.Client{backup, primary}})
	fmt.Println(err)
	// Output:
	// claude → gpt: unavailable
	// Hello from the backup. primary calls: 2
	// llm: a fallback list holds its own primary or one client twice: fallback 2 is the primary
}

// The models a Fallback may answer with, the primary's first: each
// client's Model() (its name when it has none), what a spend guard must
// price a call at (agent reserves at the dearest).
func ExampleFallback_Models() {
	chain, err := llm.NewFallback(llm.FallbackConfig{
		Primary:   exampleModel{llmtest.NewScript(), "claude-haiku"},
		Fallbacks: []llm.Client{exampleModel{llmtest.NewScript(), "claude-opus"}},
		Names:     []string{"fast", "backup"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(chain.Models())
	// Output: [claude-haiku claude-opus]
}

// exampleModel is a client that names its model.
type exampleModel struct {
	llm.Client
	model string
}

func (m exampleModel) Model() string { return m.model }
