package memory

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/llm"
)

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"What's my dentist's name again?", []string{"dentist", "name"}},
		{"Dentists, DENTIST; dentist!", []string{"dentist", "dentist", "dentist"}},
		{"The user is running 3 marathons in 2025", []string{"user", "run", "3", "marathon", "2025"}},
		{"what is it? the and of", nil},
		{"?!... --- ", nil},
		{"", nil},
		{"Zoë's café", []string{"zoë", "café"}},
		{"e-mail o'brien", []string{"e", "mail", "o", "brien"}},
	} {
		if got := words(tc.text); !slices.Equal(got, tc.want) {
			t.Errorf("words(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
	if got := queryTerms("dentist dentists DENTIST name"); !slices.Equal(got, []string{"dentist", "name"}) {
		t.Errorf("queryTerms = %q", got)
	}
}

func TestEstimateTokens(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 2: 1, 3: 1, 4: 2, 6: 2, 7: 3, 300: 100} {
		if got := EstimateTokens(string(make([]byte, n))); got != want {
			t.Errorf("EstimateTokens of %d bytes = %d, want %d", n, got, want)
		}
	}
}

// TestBoundedConversations appends to 100,000 conversations with
// MaxConversations 1,000: the provider holds at most 1,000, and the heap
// grows by what 1,000 small conversations take, not 100,000.
func TestBoundedConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("slow in -short mode")
	}
	const conversations, max = 100_000, 1_000
	ctx := context.Background()
	turn := []llm.Message{llm.UserMessage("hello"), llm.AssistantMessage("hi")}

	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	m := newInMemory(t, Config{MaxConversations: max})
	for i := range conversations {
		if err := m.Append(ctx, fmt.Sprintf("tenant-%d", i%100), fmt.Sprintf("conversation-%d", i), turn...); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	m.convMu.Lock()
	held, listed := len(m.convs), m.lru.Len()
	m.convMu.Unlock()
	if held != max || listed != max {
		t.Errorf("the provider holds %d conversations (%d in the LRU list), want %d", held, listed, max)
	}
	// A small conversation takes well under 1 KiB; 100,000 of them would
	// take tens of MiB.
	grown := int64(after) - int64(before)
	if limit := int64(max * 4 << 10); grown > limit {
		t.Errorf("the heap grew by %d bytes for %d conversations held, more than %d", grown, held, limit)
	}
	t.Logf("heap grew by %d bytes: %d per conversation held", grown, grown/int64(held))
	runtime.KeepAlive(m)
}

// TestReleased checks that what expires, is evicted or is forgotten
// leaves nothing behind: no conversation, no tenant, no index entry.
func TestReleased(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newInMemory(t, Config{IdleTTL: time.Hour, Clock: clk})
	turn := []llm.Message{llm.UserMessage("hello"), llm.AssistantMessage("hi")}
	for i := range 10 {
		if err := m.Append(ctx, "alice", fmt.Sprint(i), turn...); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(2 * time.Hour)
	if _, err := m.History(ctx, "bob", "x", 0); err != nil {
		t.Fatal(err)
	}
	if len(m.convs) != 0 || m.lru.Len() != 0 {
		t.Errorf("after the TTL %d conversations are held (%d in the LRU list)", len(m.convs), m.lru.Len())
	}

	ids, err := m.Remember(ctx, "alice",
		Item{Text: "dentist Kim", Source: Provenance{ConversationID: "c1"}},
		Item{Text: "dentist Lee", Source: Provenance{ConversationID: "c1"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Remember(ctx, "alice", Item{Text: "dentist Lee", Supersedes: ids[0], Source: Provenance{TaskID: "t"}}); err != nil {
		t.Fatal(err)
	}
	if n, err := m.Forget(ctx, "alice", Provenance{ConversationID: "c1"}); n != 2 || err != nil {
		t.Fatalf("Forget = %d, %v", n, err)
	}
	ta := m.tenants["alice"]
	if ta == nil || len(ta.byID) != 1 || ta.order.Len() != 1 || len(ta.postings) != 2 || ta.words != 2 || len(ta.hidden) != 1 {
		t.Errorf("tenant after Forget: %+v", ta)
	}
	if n, err := m.DeleteTenant(ctx, "alice"); n != 1 || err != nil {
		t.Fatalf("DeleteTenant = %d, %v", n, err)
	}
	if len(m.tenants) != 0 || m.items.Len() != 0 {
		t.Errorf("after DeleteTenant: %d tenants, %d items", len(m.tenants), m.items.Len())
	}
}

// BenchmarkIdleConversationHeap reports the heap an idle conversation of
// one short turn holds, with 100,000 of them held.
func BenchmarkIdleConversationHeap(b *testing.B) {
	const conversations = 100_000
	ctx := context.Background()
	turn := []llm.Message{llm.UserMessage("What's on my calendar tomorrow?"), llm.AssistantMessage("You have a dentist appointment at 10:00.")}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m := newInMemory(b, Config{MaxConversations: conversations})
		for i := range conversations {
			if err := m.Append(ctx, "tenant", "conversation-"+strconv.Itoa(i), turn...); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/conversations, "heap-B/conversation")
		runtime.KeepAlive(m)
	}
}

// BenchmarkTurn is one turn's history work: load the window, append the turn.
func BenchmarkTurn(b *testing.B) {
	ctx := context.Background()
	m := newInMemory(b, Config{})
	turn := []llm.Message{llm.UserMessage("What's on my calendar tomorrow?"), llm.AssistantMessage("You have a dentist appointment at 10:00.")}
	i := 0
	for b.Loop() {
		conv := "conversation-" + strconv.Itoa(i%1000)
		if _, err := m.History(ctx, "tenant", conv, 40); err != nil {
			b.Fatal(err)
		}
		if err := m.Append(ctx, "tenant", conv, turn...); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkRecall recalls from a tenant holding the default cap of items.
func BenchmarkRecall(b *testing.B) {
	ctx := context.Background()
	m := newInMemory(b, Config{})
	topics := []string{"dentist", "flight", "birthday", "calendar", "invoice", "recipe", "password", "meeting", "holiday", "doctor"}
	for i := range DefaultMaxItemsPerTenant {
		text := fmt.Sprintf("The user's %s note number %d mentions %s and %s.", topics[i%10], i, topics[(i*7)%10], topics[(i*3)%10])
		if _, err := m.Remember(ctx, "tenant", Item{Text: text}); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := m.Recall(ctx, "tenant", "What's my dentist's name again, and when is the meeting?", Budget{MaxTokens: 500, MaxEntries: 10}); err != nil {
			b.Fatal(err)
		}
	}
}

// newInMemory returns an InMemory configured by cfg, failing the test
// when NewInMemory refuses cfg.
func newInMemory(t testing.TB, cfg Config) *InMemory {
	t.Helper()
	m, err := NewInMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
