package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// Forget erases a conversation "and the long-term items it wrote". A fact
// extraction of that conversation still running in the background (or
// waiting in the queue) when Forget returns writes its items afterwards,
// with the forgotten conversation as their provenance: the facts of a
// conversation the user deleted come back in every later conversation.
func TestForgetRacesBackgroundExtraction(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	started, release := make(chan struct{}), make(chan struct{})
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.ToolChoice == agent.RememberToolName {
			close(started)
			<-release
			return remember(`[{"text":"The user's dentist is Dr. Kim.","kind":"person"}]`)
		}
		return llmtest.Text("Noted.")
	})
	o := newOrch(t, s, agent.Config{Memory: mem, MemoryOptions: agent.MemoryOptions{Extract: true}})
	if _, err := o.HandleMessage(ctx, msg("My dentist is Dr. Kim.")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the extraction did not start")
	}
	// The user deletes the conversation.
	if err := o.Forget(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	close(release)
	closeOrch(t, o)
	items, err := mem.Recall(ctx, "u1", "dentist", memory.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 0 {
		t.Fatalf("after Forget(c1) the tenant still recalls items written by c1: %+v", items)
	}
}
