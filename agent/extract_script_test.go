package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// A user's test of a bot with fact extraction on: the conversation is
// scripted in order, the extractions (made in the background after each
// reply, racing the next message) by their purpose. The strict script
// passes however the two interleave.
func TestStrictScriptWithExtractionByPurpose(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	model := llmtest.NewStrictScript(t,
		llmtest.Text("Noted."),
		llmtest.Text("Anything else?"),
	).On(llm.PurposeRememberFacts,
		llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"}),
		llmtest.Remember(), // nothing worth keeping in "Thanks!"
	)
	o := newOrch(t, model, agent.Config{Memory: mem, MemoryOptions: agent.MemoryOptions{Extract: true}})
	for _, text := range []string{"My dentist is Dr. Kim.", "Thanks!"} {
		if _, err := o.HandleMessage(ctx, msg(text)); err != nil {
			t.Fatal(err)
		}
	}
	closeOrch(t, o) // waits for the extractions, before the script is checked
	items, err := mem.Recall(ctx, "u1", "dentist", memory.Budget{})
	if err != nil || len(items) != 1 || items[0].Text != "The user's dentist is Dr. Kim." || items[0].Kind != "person" {
		t.Fatalf("Recall = %+v, %v", items, err)
	}
}

// A strict script that does not script the extractions still passes with
// extraction on: each one remembers nothing, and none takes a reply meant
// for the conversation.
func TestStrictScriptWithExtractionUnscripted(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	model := llmtest.NewStrictScript(t, llmtest.Text("Noted."), llmtest.Text("Anything else?"))
	o := newOrch(t, model, agent.Config{Memory: mem, MemoryOptions: agent.MemoryOptions{Extract: true}})
	for _, want := range []struct{ text, reply string }{{"My dentist is Dr. Kim.", "Noted."}, {"Thanks!", "Anything else?"}} {
		res, err := o.HandleMessage(ctx, msg(want.text))
		if err != nil || res.Response != want.reply {
			t.Fatalf("%q: res = %+v, err = %v", want.text, res, err)
		}
	}
	closeOrch(t, o)
	if n := model.Calls(); n != 4 {
		t.Fatalf("%d model calls, want 2 replies and 2 extractions", n)
	}
	if items, _ := mem.Recall(ctx, "u1", "dentist", memory.Budget{}); len(items) != 0 {
		t.Fatalf("an unscripted extraction remembered %+v", items)
	}
}
