package agent_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// forgetDuringExtraction holds the extraction of "My dentist is Dr.
// Kim." until Forget and a new message ("I like green tea.") have gone
// through — on the same orchestrator, or on a second one sharing the
// memory provider (another replica) — and checks that the forgotten
// turn's fact is not stored and the new turn's is.
func forgetDuringExtraction(t *testing.T, otherReplica bool) {
	t.Helper()
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	started, release := make(chan struct{}), make(chan struct{})
	var extractions atomic.Int32
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.ToolChoice == agent.RememberToolName {
			if extractions.Add(1) == 1 {
				close(started)
				<-release
				return remember(`[{"text":"The user's dentist is Dr. Kim.","kind":"person"}]`)
			}
			return remember(`[{"text":"The user likes green tea.","kind":"preference"}]`)
		}
		return llmtest.Text("Noted.")
	})
	cfg := agent.Config{Memory: mem, MemoryOptions: agent.MemoryOptions{Extract: true}}
	o1 := newOrch(t, s, cfg)
	o2 := o1
	if otherReplica {
		o2 = newOrch(t, s, cfg)
	}
	if _, err := o1.HandleMessage(ctx, msg("My dentist is Dr. Kim.")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the extraction did not start")
	}
	if err := o2.Forget(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	// The user writes to the conversation again: it has history anew.
	if _, err := o2.HandleMessage(ctx, msg("I like green tea.")); err != nil {
		t.Fatal(err)
	}
	close(release)
	closeOrch(t, o1)
	if otherReplica {
		closeOrch(t, o2)
	}
	items, err := mem.Recall(ctx, "u1", "dentist Kim", memory.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 0 {
		t.Fatalf("the forgotten turn's facts were stored after Forget (other replica: %v): %+v", otherReplica, items)
	}
	// The turn after the Forget is learnt from as usual.
	items, err = mem.Recall(ctx, "u1", "green tea", memory.Budget{})
	if err != nil || len(items) != 1 || items[0].Text != "The user likes green tea." {
		t.Fatalf("the new turn's fact: %+v, %v", items, err)
	}
}

// Forget wins over an extraction of the forgotten turn that is still
// running, also when the conversation is written to again before the
// extraction stores: the new turn's history is no sign that the forgotten
// turn's facts may come back.
func TestForgetWinsOverExtractionWhenConversationContinues(t *testing.T) {
	forgetDuringExtraction(t, false)
}

// Forget wins over an extraction still running on another replica (two
// orchestrators sharing the memory provider), also when the conversation
// is written to again before that extraction stores.
func TestForgetOnAnotherReplicaWinsOverExtraction(t *testing.T) {
	forgetDuringExtraction(t, true)
}
