package memorytest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

func testCancelled(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("hello", "hi"))
	remember(t, p, "alice", memory.Item{Text: "a note", Source: memory.Provenance{ConversationID: "c1"}})
	ctx, cancel := context.WithCancel(bg)
	cancel()
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled ctx: got %v, want context.Canceled", what, err)
		}
	}
	_, err := p.History(ctx, "alice", "c1", 0)
	want("History", err)
	want("Append", p.Append(ctx, "alice", "c1", chat("more", "text")...))
	_, err = p.Remember(ctx, "alice", memory.Item{Text: "another note"})
	want("Remember", err)
	_, err = p.Recall(ctx, "alice", "note", memory.Budget{})
	want("Recall", err)
	_, err = p.Forget(ctx, "alice", memory.Provenance{ConversationID: "c1"})
	want("Forget", err)
	if d, ok := p.(memory.TenantDeleter); ok {
		_, err = d.DeleteTenant(ctx, "alice")
		want("DeleteTenant", err)
	}
	wantMessages(t, "history after cancelled calls", chat("hello", "hi"), history(t, p, "alice", "c1", 0))
	if got := texts(recall(t, p, "alice", "note", memory.Budget{})); !slices.Equal(got, []string{"a note"}) {
		t.Errorf("items after cancelled calls: %q", got)
	}
}

func testConcurrent(t *testing.T, p memory.Provider) {
	const writers, turns = 5, 5 // 5 × 5 turns of 4 messages: 100 messages
	var wg sync.WaitGroup
	ids := make([][]string, writers)
	errs := make(chan error, writers*turns*4)
	for w := range writers {
		wg.Go(func() {
			for i := range turns {
				tag := fmt.Sprintf("w%d-%d", w, i)
				if err := p.Append(bg, "alice", "shared", toolTurn("ask "+tag, "answer "+tag, "call-"+tag)...); err != nil {
					errs <- err
				}
				got, err := p.Remember(bg, "alice", memory.Item{Text: "concurrent note " + tag})
				if err != nil {
					errs <- err
				}
				ids[w] = append(ids[w], got...)
				if _, err := p.History(bg, "alice", "shared", 6); err != nil {
					errs <- err
				}
				if _, err := p.Recall(bg, "alice", "concurrent note", memory.Budget{MaxEntries: 3}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	h := history(t, p, "alice", "shared", 0)
	if len(h) != writers*turns*4 {
		t.Errorf("History holds %d messages, want %d", len(h), writers*turns*4)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Errorf("History breaks pairing: %v", err)
	}
	for i := 0; i+4 <= len(h); i += 4 { // each turn whole, not interleaved
		tag := strings.TrimPrefix(h[i].Content, "ask ")
		if h[i+1].ToolCalls[0].ID != "call-"+tag || h[i+3].Content != "answer "+tag {
			t.Errorf("turn at %d is not whole: %s", i, render(h[i:i+4]))
			break
		}
	}
	all := slices.Concat(ids...)
	slices.Sort(all)
	if n := len(slices.Compact(all)); n != writers*turns {
		t.Errorf("concurrent Remembers returned %d distinct IDs, want %d", n, writers*turns)
	}
	if got := recall(t, p, "alice", "concurrent", memory.Budget{}); len(got) != writers*turns {
		t.Errorf("Recall finds %d of the %d concurrent items", len(got), writers*turns)
	}
}
