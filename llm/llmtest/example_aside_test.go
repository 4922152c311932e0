package llmtest_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A bot with fact extraction on: after each reply the orchestrator asks
// the model, in the background, what to remember. Those calls race the
// next message, so the script gives them replies of their own, by
// purpose; the conversation keeps its replies in order. (In a test,
// NewStrictScript(t, ...).On(...) also fails the test on a missing or
// unused reply of either kind.)
func ExampleScript_On() {
	model := llmtest.NewScript(
		llmtest.Text("Noted: Dr. Kim."),
		llmtest.Text("You're welcome!"),
		llmtest.Text("Your dentist is Dr. Kim."),
	).On(llm.PurposeRememberFacts,
		llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"}),
		llmtest.Remember(), // "Thanks!" holds nothing worth keeping
	)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:           model,
		MemoryOptions: agent.MemoryOptions{Extract: true},
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, text := range []string{"My dentist is Dr. Kim.", "Thanks!"} {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: text})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Response)
	}
	// Close waits for the extractions (a test does it before the script
	// is checked).
	if err := o.Close(ctx); err != nil {
		panic(err)
	}

	// Another conversation recalls what was learnt.
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c2", Text: "Who is my dentist?"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Response)
	reqs := model.Requests()
	fmt.Println("recalled:", strings.Contains(reqs[len(reqs)-1].Messages[0].Content, "The user's dentist is Dr. Kim."))
	fmt.Println("replies left:", model.Remaining(), "errors:", model.Err())
	// Output:
	// Noted: Dr. Kim.
	// You're welcome!
	// Your dentist is Dr. Kim.
	// recalled: true
	// replies left: 0 errors: <nil>
}
