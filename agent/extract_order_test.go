package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/clock"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// Extractions of one conversation run concurrently (4 workers) and their
// items get CreatedAt = when Remember ran, not when the user said it. The
// user corrects a fact in the next message; the older message's
// extraction, slower, lands after the newer one's, so the stale fact is
// the "newest" item and neither supersedes the other (the second message
// could not recall the first fact: it was not stored yet). Recall puts
// the stale fact first among equals. Extractions of a conversation should
// run in order (or items carry the turn's time).
func TestExtractionsLandOutOfOrder(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	slowFirst := make(chan struct{})
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.ToolChoice != agent.RememberToolName {
			return llmtest.Text("Noted.")
		}
		turn := req.Messages[1].Content
		if strings.Contains(turn, "Dr. Kim") {
			<-slowFirst // the first extraction is slow (a retry, a slow model)
			return remember(`[{"text":"The user's dentist is Dr. Kim.","kind":"person"}]`)
		}
		return remember(`[{"text":"The user's dentist is Dr. Lee.","kind":"person"}]`)
	})
	o := newOrch(t, s, agent.Config{Memory: mem, MemoryOptions: agent.MemoryOptions{Extract: true}, Clock: clock.System{}})
	if _, err := o.HandleMessage(ctx, msg("My dentist is Dr. Kim.")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.HandleMessage(ctx, msg("Correction: my dentist is Dr. Lee now.")); err != nil {
		t.Fatal(err)
	}
	// Give the second extraction time to overtake the first, if it can
	// (it must not: a conversation's extractions run in order).
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if items, _ := mem.Recall(ctx, "u1", "dentist", memory.Budget{}); len(items) == 1 {
			break
		}
	}
	close(slowFirst)
	closeOrch(t, o)
	items, err := mem.Recall(ctx, "u1", "Who is my dentist?", memory.Budget{MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 1 || !strings.Contains(items[0].Text, "Lee") {
		t.Fatalf("the user's latest word is Dr. Lee; recall's best item: %+v", items)
	}
}
