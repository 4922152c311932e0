package memorytest

import (
	"slices"
	"testing"

	"github.com/valetkit/valet/memory"
)

func testForget(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("hello", "hi"))
	appendTurn(t, p, "alice", "c1", toolTurn("look it up", "done", "x1"))
	appendTurn(t, p, "alice", "c2", chat("other", "conversation"))
	item := func(text string, src memory.Provenance) memory.Item { return memory.Item{Text: text, Source: src} }
	remember(t, p, "alice",
		item("note one from c1", memory.Provenance{ConversationID: "c1"}),
		item("note two from c1 by task t1", memory.Provenance{ConversationID: "c1", TaskID: "t1"}),
		item("note three from c1 by skill s1", memory.Provenance{ConversationID: "c1", SkillID: "s1"}),
		item("note four from c2", memory.Provenance{ConversationID: "c2"}),
		item("note five by task t1", memory.Provenance{TaskID: "t1"}),
		item("note six by skill s1", memory.Provenance{SkillID: "s1"}),
		item("note seven by task t2 with skill s1", memory.Provenance{TaskID: "t2", SkillID: "s1"}),
		item("note eight from nowhere", memory.Provenance{}),
	)
	notes := func() []string {
		got := texts(recall(t, p, "alice", "note", memory.Budget{}))
		slices.Sort(got)
		return got
	}
	gone := func(by memory.Provenance, want int, left ...string) {
		t.Helper()
		if n := forget(t, p, "alice", by); n != want {
			t.Errorf("Forget(%+v) removed %d, want %d", by, n, want)
		}
		slices.Sort(left)
		if got := notes(); !slices.Equal(got, left) {
			t.Errorf("after Forget(%+v) the items are %q, want %q", by, got, left)
		}
	}
	c1 := history(t, p, "alice", "c1", 0)
	c2 := history(t, p, "alice", "c2", 0)

	// Every non-empty field must match; a task or skill leaves histories.
	gone(memory.Provenance{ConversationID: "c2", TaskID: "t1"}, 0,
		"note one from c1", "note two from c1 by task t1", "note three from c1 by skill s1", "note four from c2",
		"note five by task t1", "note six by skill s1", "note seven by task t2 with skill s1", "note eight from nowhere")
	gone(memory.Provenance{TaskID: "t1"}, 2,
		"note one from c1", "note three from c1 by skill s1", "note four from c2",
		"note six by skill s1", "note seven by task t2 with skill s1", "note eight from nowhere")
	gone(memory.Provenance{TaskID: "t2", SkillID: "s1"}, 1,
		"note one from c1", "note three from c1 by skill s1", "note four from c2",
		"note six by skill s1", "note eight from nowhere")
	gone(memory.Provenance{SkillID: "s1"}, 2,
		"note one from c1", "note four from c2", "note eight from nowhere")
	wantMessages(t, "c1 after Forget by task and skill", c1, history(t, p, "alice", "c1", 0))

	// A conversation: its items and its history (2 + 4 messages).
	gone(memory.Provenance{ConversationID: "c1"}, 1+len(c1), "note four from c2", "note eight from nowhere")
	if h := history(t, p, "alice", "c1", 0); len(h) != 0 {
		t.Errorf("c1's history after Forget: %s", render(h))
	}
	wantMessages(t, "c2 after Forget of c1", c2, history(t, p, "alice", "c2", 0))
	gone(memory.Provenance{ConversationID: "c1"}, 0, "note four from c2", "note eight from nowhere")

	// A conversation with history but no items.
	appendTurn(t, p, "alice", "c3", chat("only", "history"))
	gone(memory.Provenance{ConversationID: "c3"}, 2, "note four from c2", "note eight from nowhere")
	// A conversation with an ID of nothing else.
	gone(memory.Provenance{ConversationID: "nothing"}, 0, "note four from c2", "note eight from nowhere")
	// History can be written again after Forget.
	appendTurn(t, p, "alice", "c1", chat("back", "again"))
	wantMessages(t, "c1 written after Forget", chat("back", "again"), history(t, p, "alice", "c1", 0))
}

func testForgetInvalid(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("hello", "hi"))
	remember(t, p, "alice", memory.Item{Text: "a note", Source: memory.Provenance{ConversationID: "c1"}})
	_, err := p.Forget(bg, "alice", memory.Provenance{})
	wantInvalid(t, "Forget with an empty Provenance", err)
	_, err = p.Forget(bg, "", memory.Provenance{ConversationID: "c1"})
	wantInvalid(t, "Forget with an empty tenant", err)
	if got := recall(t, p, "alice", "note", memory.Budget{}); len(got) != 1 {
		t.Errorf("after rejected Forgets: %q", texts(got))
	}
	wantMessages(t, "history after rejected Forgets", chat("hello", "hi"), history(t, p, "alice", "c1", 0))
}

func testDeleteTenant(t *testing.T, p memory.Provider) {
	d, ok := p.(memory.TenantDeleter)
	if !ok {
		t.Skip("the provider is not a memory.TenantDeleter")
	}
	for _, tenant := range []string{"alice", "bob"} {
		appendTurn(t, p, tenant, "c1", chat("hello", "hi"))
		appendTurn(t, p, tenant, "c2", toolTurn("look", "done", "x"))
		remember(t, p, tenant,
			memory.Item{Text: "first note", Source: memory.Provenance{ConversationID: "c1"}},
			memory.Item{Text: "second note", Source: memory.Provenance{TaskID: "t"}},
			memory.Item{Text: "third note"},
		)
	}
	n, err := d.DeleteTenant(bg, "alice")
	if err != nil || n != 3+2+4 {
		t.Errorf("DeleteTenant(alice) = %d, %v; want 9 (3 items, 6 messages), nil", n, err)
	}
	if got := recall(t, p, "alice", "note", memory.Budget{}); len(got) != 0 {
		t.Errorf("alice recalls %q after DeleteTenant", texts(got))
	}
	for _, conv := range []string{"c1", "c2"} {
		if h := history(t, p, "alice", conv, 0); len(h) != 0 {
			t.Errorf("alice's %s after DeleteTenant: %s", conv, render(h))
		}
		if h := history(t, p, "bob", conv, 0); len(h) == 0 {
			t.Errorf("bob's %s is gone after DeleteTenant(alice)", conv)
		}
	}
	if got := recall(t, p, "bob", "note", memory.Budget{}); len(got) != 3 {
		t.Errorf("bob recalls %q after DeleteTenant(alice), want his 3 items", texts(got))
	}
	if n, err := d.DeleteTenant(bg, "alice"); err != nil || n != 0 {
		t.Errorf("second DeleteTenant(alice) = %d, %v; want 0, nil", n, err)
	}
	_, err = d.DeleteTenant(bg, "")
	wantInvalid(t, "DeleteTenant of an empty tenant", err)
	// The tenant can start again.
	appendTurn(t, p, "alice", "c1", chat("new", "start"))
	remember(t, p, "alice", memory.Item{Text: "fresh note"})
	if got := texts(recall(t, p, "alice", "note", memory.Budget{})); !slices.Equal(got, []string{"fresh note"}) {
		t.Errorf("alice recalls %q after starting again", got)
	}
}
