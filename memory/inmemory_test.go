package memory_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/memorytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

func TestInMemoryConformance(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Provider { return newMem(t, memory.Config{}) })
}

// TestInMemoryConformanceTightBounds runs the suite with bounds just large
// enough for it, so that eviction runs all the time without removing what
// the suite still needs.
func TestInMemoryConformanceTightBounds(t *testing.T) {
	memorytest.Run(t, func(t *testing.T) memory.Provider {
		return newMem(t, memory.Config{MaxConversations: 12, MaxMessages: 100, MaxItemsPerTenant: 100, MaxItems: 120})
	})
}

func newClock() *clocktest.Clock { return clocktest.New(time.Date(2025, 1, 1, 9, 0, 0, 0, time.UTC)) }

func chat(user, answer string) []llm.Message {
	return []llm.Message{llm.UserMessage(user), llm.AssistantMessage(answer)}
}

func mustAppend(t *testing.T, m memory.Provider, tenant, conv string, msgs ...llm.Message) {
	t.Helper()
	if err := m.Append(bg, tenant, conv, msgs...); err != nil {
		t.Fatalf("Append(%s, %s): %v", tenant, conv, err)
	}
}

func historyLen(t *testing.T, m memory.Provider, tenant, conv string) int {
	t.Helper()
	h, err := m.History(bg, tenant, conv, 0)
	if err != nil {
		t.Fatalf("History(%s, %s): %v", tenant, conv, err)
	}
	return len(h)
}

func recallTexts(t *testing.T, m memory.Provider, tenant, query string) []string {
	t.Helper()
	items, err := m.Recall(bg, tenant, query, memory.Budget{})
	if err != nil {
		t.Fatalf("Recall(%s, %q): %v", tenant, query, err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.Text)
	}
	slices.Sort(out)
	return out
}

func TestLRUEviction(t *testing.T) {
	m := newMem(t, memory.Config{MaxConversations: 3})
	mustAppend(t, m, "alice", "c1", chat("one", "1")...)
	mustAppend(t, m, "alice", "c2", chat("two", "2")...)
	mustAppend(t, m, "bob", "c3", chat("three", "3")...)
	if historyLen(t, m, "alice", "c1") != 2 { // c1 is now the most recently used
		t.Fatal("c1 lost before the cap was reached")
	}
	mustAppend(t, m, "bob", "c4", chat("four", "4")...) // drops c2, the least recently used
	if n := historyLen(t, m, "alice", "c2"); n != 0 {
		t.Errorf("c2, the least recently used, still holds %d messages", n)
	}
	for _, k := range [][2]string{{"alice", "c1"}, {"bob", "c3"}, {"bob", "c4"}} {
		if n := historyLen(t, m, k[0], k[1]); n != 2 {
			t.Errorf("%s/%s holds %d messages, want 2", k[0], k[1], n)
		}
	}
	// Appending to a kept conversation makes it recent and drops nothing.
	mustAppend(t, m, "bob", "c3", chat("three again", "3")...)
	if n := historyLen(t, m, "bob", "c3"); n != 4 {
		t.Errorf("c3 holds %d messages, want 4", n)
	}
	// Items are not conversations: eviction leaves them.
	if _, err := m.Remember(bg, "alice", memory.Item{Text: "a note", Source: memory.Provenance{ConversationID: "c2"}}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, m, "carol", "c5", chat("five", "5")...)
	if got := recallTexts(t, m, "alice", "note"); len(got) != 1 {
		t.Errorf("alice's item after evictions: %q", got)
	}
}

func TestIdleTTL(t *testing.T) {
	clk := newClock()
	m := newMem(t, memory.Config{IdleTTL: time.Hour, Clock: clk})
	mustAppend(t, m, "alice", "c1", chat("one", "1")...) // 9:00
	if _, err := m.Remember(bg, "alice", memory.Item{Text: "a long-term note"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Minute)
	if historyLen(t, m, "alice", "c1") != 2 { // 9:30: used
		t.Fatal("c1 lost before its TTL")
	}
	mustAppend(t, m, "alice", "c2", chat("two", "2")...) // 9:30
	clk.Advance(30 * time.Minute)
	mustAppend(t, m, "alice", "c3", chat("three", "3")...) // 10:00
	clk.Advance(time.Hour)                                 // 11:00: c1 and c2 idle 90 minutes, c3 exactly the TTL
	if n := historyLen(t, m, "alice", "c3"); n != 2 {
		t.Errorf("c3, idle exactly the TTL, holds %d messages, want 2", n)
	}
	for _, conv := range []string{"c1", "c2"} {
		if n := historyLen(t, m, "alice", conv); n != 0 {
			t.Errorf("%s, idle past the TTL, holds %d messages", conv, n)
		}
	}
	clk.Advance(48 * time.Hour)
	if got := recallTexts(t, m, "alice", "note"); len(got) != 1 {
		t.Errorf("items do not expire, but recall gave %q", got)
	}
	// An expired conversation starts afresh.
	mustAppend(t, m, "alice", "c1", chat("again", "1")...)
	if n := historyLen(t, m, "alice", "c1"); n != 2 {
		t.Errorf("c1 written after expiry holds %d messages, want 2", n)
	}
}

func TestMaxMessages(t *testing.T) {
	m := newMem(t, memory.Config{MaxMessages: 5})
	calls := []llm.ToolCall{{ID: "a", Name: "x", Arguments: []byte(`{}`)}, {ID: "b", Name: "x", Arguments: []byte(`{}`)}}
	toolTurn := []llm.Message{
		llm.UserMessage("look twice"),
		llm.AssistantMessage("", calls...),
		llm.ToolResultMessage(calls[0], "ra", false),
		llm.ToolResultMessage(calls[1], "rb", false),
		llm.AssistantMessage("looked"),
	}
	mustAppend(t, m, "alice", "c", chat("hello", "hi")...)
	mustAppend(t, m, "alice", "c", toolTurn...) // 7 messages: the first turn goes
	h, _ := m.History(bg, "alice", "c", 0)
	if len(h) != 5 || h[0].Content != "look twice" {
		t.Errorf("after 7 messages with a cap of 5: %d messages from %q, want the 5 of the tool turn", len(h), h[0].Content)
	}
	mustAppend(t, m, "alice", "c", chat("bye", "ciao")...) // cut at 2 would start with the results: they go too
	h, _ = m.History(bg, "alice", "c", 0)
	var got []string
	for _, msg := range h {
		got = append(got, msg.Content)
	}
	if want := []string{"looked", "bye", "ciao"}; !slices.Equal(got, want) {
		t.Errorf("history %q, want %q", got, want)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Error(err)
	}
	// A turn longer than the cap keeps its newest messages.
	long := slices.Concat(chat("1", "1"), chat("2", "2"), chat("3", "3"), chat("4", "4"))
	mustAppend(t, m, "alice", "d", long...)
	if n := historyLen(t, m, "alice", "d"); n != 5 {
		t.Errorf("a turn of 8 messages with a cap of 5 kept %d", n)
	}
}

func TestItemCapPerTenant(t *testing.T) {
	m := newMem(t, memory.Config{MaxItemsPerTenant: 3})
	var ids []string
	for i := 1; i <= 5; i++ {
		got, err := m.Remember(bg, "alice", memory.Item{Text: fmt.Sprintf("note %d", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	if _, err := m.Remember(bg, "bob", memory.Item{Text: "note of bob"}); err != nil {
		t.Fatal(err)
	}
	if got, want := recallTexts(t, m, "alice", "note"), []string{"note 3", "note 4", "note 5"}; !slices.Equal(got, want) {
		t.Errorf("alice recalls %q, want the newest three %q", got, want)
	}
	if got := recallTexts(t, m, "bob", "note"); len(got) != 1 {
		t.Errorf("bob recalls %q", got)
	}
	_, err := m.Remember(bg, "alice", memory.Item{Text: "a"}, memory.Item{Text: "b"}, memory.Item{Text: "c"}, memory.Item{Text: "d"})
	if !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("Remember of more items than the cap: %v, want ErrInvalid", err)
	}
	// A superseding item that is dropped no longer hides the old one.
	m = newMem(t, memory.Config{MaxItemsPerTenant: 2})
	old, _ := m.Remember(bg, "alice", memory.Item{Text: "dentist Kim"})
	m.Remember(bg, "alice", memory.Item{Text: "dentist Lee", Supersedes: old[0]})
	m.Remember(bg, "alice", memory.Item{Text: "barber Sam"}) // drops "dentist Kim"
	if got := recallTexts(t, m, "alice", "dentist"); !slices.Equal(got, []string{"dentist Lee"}) {
		t.Errorf("recall %q", got)
	}
	m.Remember(bg, "alice", memory.Item{Text: "baker Tom"}) // drops "dentist Lee"
	if got := recallTexts(t, m, "alice", "dentist barber baker"); !slices.Equal(got, []string{"baker Tom", "barber Sam"}) {
		t.Errorf("recall %q", got)
	}
}

func TestItemCapTotal(t *testing.T) {
	m := newMem(t, memory.Config{MaxItems: 4, MaxItemsPerTenant: 3})
	for _, r := range []struct{ tenant, text string }{
		{"alice", "note a1"}, {"alice", "note a2"}, {"bob", "note b1"}, {"alice", "note a3"}, {"bob", "note b2"},
	} {
		if _, err := m.Remember(bg, r.tenant, memory.Item{Text: r.text}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := recallTexts(t, m, "alice", "note"), []string{"note a2", "note a3"}; !slices.Equal(got, want) {
		t.Errorf("alice recalls %q, want %q (the oldest of all went)", got, want)
	}
	if got, want := recallTexts(t, m, "bob", "note"), []string{"note b1", "note b2"}; !slices.Equal(got, want) {
		t.Errorf("bob recalls %q, want %q", got, want)
	}
}

func TestCreatedAtFromClock(t *testing.T) {
	clk := newClock()
	m := newMem(t, memory.Config{Clock: clk})
	m.Remember(bg, "alice", memory.Item{Text: "a note"})
	items, _ := m.Recall(bg, "alice", "note", memory.Budget{})
	if len(items) != 1 || !items[0].CreatedAt.Equal(clk.Now()) {
		t.Errorf("items %+v, want CreatedAt %v", items, clk.Now())
	}
}
