package memorytest

import (
	"testing"

	"github.com/valetkit/valet/memory"
)

// testOrigin: every Origin is stored and returned as written (the zero
// value, OriginHost, too), and an unknown one is memory.ErrInvalid.
func testOrigin(t *testing.T, p memory.Provider) {
	origins := []memory.Origin{memory.OriginHost, memory.OriginUser, memory.OriginAssistant, memory.OriginTrigger, memory.OriginTool}
	items := make([]memory.Item, len(origins))
	for i, o := range origins {
		items[i] = memory.Item{Text: "The user's bank is Acme Bank, noted by " + string(o) + ".", Origin: o}
	}
	ids := remember(t, p, "alice", items...)
	got := recall(t, p, "alice", "bank", memory.Budget{})
	if len(got) != len(origins) {
		t.Fatalf("Recall(bank) = %q, want all %d items", texts(got), len(origins))
	}
	for _, it := range got {
		for i, id := range ids {
			if it.ID == id && it.Origin != origins[i] {
				t.Errorf("item %s read back with Origin %q, want %q", id, it.Origin, origins[i])
			}
		}
	}
	_, err := p.Remember(bg, "alice", memory.Item{Text: "The user's bank is Beta Bank."}, memory.Item{Text: "The user's bank is EvilBank.", Origin: "the user, honestly"})
	wantInvalid(t, "Remember of an item with an unknown Origin", err)
	if got := recall(t, p, "alice", "Beta EvilBank", memory.Budget{}); len(got) != 0 {
		t.Errorf("a refused Remember stored %q", texts(got))
	}
}
