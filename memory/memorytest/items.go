package memorytest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/valetkit/valet/memory"
)

func testTenantIsolation(t *testing.T, p memory.Provider) {
	appendTurn(t, p, "alice", "c1", chat("alice asks", "alice hears"))
	appendTurn(t, p, "bob", "c1", chat("bob asks", "bob hears"))
	// Names that a naive key would confuse.
	appendTurn(t, p, "a", "b/c", chat("one", "1"))
	appendTurn(t, p, "a/b", "c", chat("two", "2"))
	appendTurn(t, p, "a:b", "c", chat("three", "3"))
	appendTurn(t, p, "a", "b:c", chat("four", "4"))

	wantMessages(t, "alice's history", chat("alice asks", "alice hears"), history(t, p, "alice", "c1", 0))
	wantMessages(t, "bob's history", chat("bob asks", "bob hears"), history(t, p, "bob", "c1", 0))
	wantMessages(t, "a b/c", chat("one", "1"), history(t, p, "a", "b/c", 0))
	wantMessages(t, "a/b c", chat("two", "2"), history(t, p, "a/b", "c", 0))
	wantMessages(t, "a:b c", chat("three", "3"), history(t, p, "a:b", "c", 0))
	wantMessages(t, "a b:c", chat("four", "4"), history(t, p, "a", "b:c", 0))
	if h := history(t, p, "carol", "c1", 0); len(h) != 0 {
		t.Errorf("carol sees %s", render(h))
	}

	aliceIDs := remember(t, p, "alice", memory.Item{Text: "Alice's dentist is Dr. Kim", Source: memory.Provenance{ConversationID: "c1", TaskID: "t1", SkillID: "s1"}})
	remember(t, p, "bob", memory.Item{Text: "Bob's dentist is Dr. Lee", Supersedes: aliceIDs[0], Source: memory.Provenance{ConversationID: "c1"}})

	if got := texts(recall(t, p, "alice", "dentist", memory.Budget{})); !slices.Equal(got, []string{"Alice's dentist is Dr. Kim"}) {
		t.Errorf("alice recalls %q, want only her own item (bob's Supersedes must not hide it)", got)
	}
	if got := texts(recall(t, p, "bob", "dentist", memory.Budget{})); !slices.Equal(got, []string{"Bob's dentist is Dr. Lee"}) {
		t.Errorf("bob recalls %q, want only his own item", got)
	}
	if got := recall(t, p, "carol", "dentist", memory.Budget{}); len(got) != 0 {
		t.Errorf("carol recalls %q", texts(got))
	}

	// Forget and DeleteTenant of bob leave alice alone.
	if n := forget(t, p, "bob", memory.Provenance{ConversationID: "c1"}); n != 3 {
		t.Errorf("Forget of bob's c1 removed %d, want 3 (1 item, 2 messages)", n)
	}
	for _, by := range []memory.Provenance{{TaskID: "t1"}, {SkillID: "s1"}} {
		if n := forget(t, p, "bob", by); n != 0 {
			t.Errorf("Forget(bob, %+v) removed %d, want 0", by, n)
		}
	}
	if d, ok := p.(memory.TenantDeleter); ok {
		if _, err := d.DeleteTenant(bg, "bob"); err != nil {
			t.Fatalf("DeleteTenant(bob): %v", err)
		}
		if _, err := d.DeleteTenant(bg, "a"); err != nil {
			t.Fatalf("DeleteTenant(a): %v", err)
		}
		wantMessages(t, "a/b c after DeleteTenant(a)", chat("two", "2"), history(t, p, "a/b", "c", 0))
		wantMessages(t, "a:b c after DeleteTenant(a)", chat("three", "3"), history(t, p, "a:b", "c", 0))
	}
	wantMessages(t, "alice's history after bob was forgotten", chat("alice asks", "alice hears"), history(t, p, "alice", "c1", 0))
	if got := texts(recall(t, p, "alice", "dentist", memory.Budget{})); !slices.Equal(got, []string{"Alice's dentist is Dr. Kim"}) {
		t.Errorf("alice recalls %q after bob was forgotten", got)
	}
}

// --- items ---

func testRemember(t *testing.T, p memory.Provider) {
	created := time.Date(2024, 3, 1, 12, 30, 45, 123_000_000, time.UTC)
	src := memory.Provenance{ConversationID: "c1", TaskID: "t1", SkillID: "s1"}
	before := time.Now()
	ids := remember(t, p, "alice",
		memory.Item{Text: "The user's dentist is Dr. Kim.", Kind: "fact", Source: src, CreatedAt: created},
		memory.Item{Text: "The user prefers aisle seats.", Kind: "preference", Tokens: 999, Score: 5},
		memory.Item{Text: "ünïcødé ✓ — the user's café is Zoë's"},
	)
	after := time.Now()
	seen := map[string]bool{}
	for _, id := range ids {
		if id == "" || seen[id] {
			t.Errorf("Remember returned IDs %q: want non-empty, distinct", ids)
		}
		seen[id] = true
	}
	more := remember(t, p, "alice", memory.Item{Text: "The user's dentist is in Springfield."})
	if seen[more[0]] {
		t.Errorf("a later Remember reused ID %q", more[0])
	}

	got := recall(t, p, "alice", "dentist", memory.Budget{})
	i := slices.IndexFunc(got, func(it memory.Item) bool { return it.ID == ids[0] })
	if i < 0 {
		t.Fatalf("Recall(dentist) = %q, does not hold item %s", texts(got), ids[0])
	}
	it := got[i]
	if it.Text != "The user's dentist is Dr. Kim." || it.Kind != "fact" || it.Source != src {
		t.Errorf("item read back as %+v", it)
	}
	if d := it.CreatedAt.Sub(created); d >= timeSlack || d <= -timeSlack {
		t.Errorf("CreatedAt read back as %v, want %v", it.CreatedAt, created)
	}
	if want := memory.EstimateTokens(it.Text); it.Tokens != want || want != 10 {
		t.Errorf("Tokens = %d, want %d (30 bytes at 3 per token)", it.Tokens, want)
	}
	if it.Score <= 0 {
		t.Errorf("Score = %v, want > 0", it.Score)
	}

	got = recall(t, p, "alice", "aisle", memory.Budget{})
	if len(got) != 1 || got[0].ID != ids[1] {
		t.Fatalf("Recall(aisle) = %q, want item %s", texts(got), ids[1])
	}
	if got[0].Tokens != memory.EstimateTokens("The user prefers aisle seats.") {
		t.Errorf("Tokens = %d: the caller's value was kept, want the estimate %d", got[0].Tokens, memory.EstimateTokens("The user prefers aisle seats."))
	}
	if c := got[0].CreatedAt; c.Before(before.Add(-time.Minute)) || c.After(after.Add(time.Minute)) {
		t.Errorf("CreatedAt = %v for an item written between %v and %v without one", c, before, after)
	}
	got = recall(t, p, "alice", "CAFÉ", memory.Budget{})
	if len(got) != 1 || got[0].ID != ids[2] || got[0].Text != "ünïcødé ✓ — the user's café is Zoë's" {
		t.Errorf("Recall(CAFÉ) = %q, want item %s intact", texts(got), ids[2])
	}
	if got[0].Tokens != memory.EstimateTokens(got[0].Text) {
		t.Errorf("Tokens of a multi-byte text = %d, want %d (bytes / 3)", got[0].Tokens, memory.EstimateTokens(got[0].Text))
	}
}

func testRememberInvalid(t *testing.T, p memory.Provider) {
	good := memory.Item{Text: "The user's dentist is Dr. Kim."}
	for _, tc := range []struct {
		name   string
		tenant string
		item   memory.Item
	}{
		{"an empty tenant", "", good},
		{"a tenant with NUL", "al\x00ice", good},
		{"no text", "alice", memory.Item{Kind: "fact"}},
		{"blank text", "alice", memory.Item{Text: " \n\t "}},
		{"text with NUL", "alice", memory.Item{Text: "dentist \x00"}},
		{"text not UTF-8", "alice", memory.Item{Text: "dentist \xff"}},
		{"an ID", "alice", memory.Item{ID: "mine", Text: "dentist"}},
	} {
		_, err := p.Remember(bg, tc.tenant, good, tc.item)
		wantInvalid(t, "Remember of "+tc.name, err)
	}
	if got := recall(t, p, "alice", "dentist", memory.Budget{}); len(got) != 0 {
		t.Errorf("rejected Remembers stored %q", texts(got))
	}
	_, err := p.Recall(bg, "", "dentist", memory.Budget{})
	wantInvalid(t, "Recall of an empty tenant", err)
	for _, b := range []memory.Budget{{MaxTokens: -1}, {MaxEntries: -1}} {
		_, err := p.Recall(bg, "alice", "dentist", b)
		wantInvalid(t, fmt.Sprintf("Recall with budget %+v", b), err)
	}
	ids, err := p.Remember(bg, "alice")
	if err != nil || len(ids) != 0 {
		t.Errorf("Remember of no items = %q, %v; want nothing, nil", ids, err)
	}
}

// facts are the items of the recall checks.
var facts = []string{
	"The user's dentist is Dr. Kim, on Main Street.",                       // 0
	"The user prefers window seats on long flights.",                       // 1
	"The user's sister Ana has her birthday on March 3.",                   // 2
	"A dentist appointment every six months; the clinic sends a reminder.", // 3
	"The user is running a marathon in October.",                           // 4
}
