package memory_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/memorytest"
)

func TestInMemoryHybridConformance(t *testing.T) {
	memorytest.RunHybrid(t, func(t *testing.T, e llm.Embedder) memory.Provider {
		return newMem(t, memory.Config{Embedder: e})
	})
}

func TestInMemoryHybridConformanceTightBounds(t *testing.T) {
	memorytest.RunHybrid(t, func(t *testing.T, e llm.Embedder) memory.Provider {
		return newMem(t, memory.Config{Embedder: e, MaxConversations: 12, MaxMessages: 100, MaxItemsPerTenant: 100, MaxItems: 120})
	})
}

// TestInMemoryEmbedCalls: one Embed call per Remember and per Recall,
// none when there is nothing to embed.
func TestInMemoryEmbedCalls(t *testing.T) {
	emb := llmtest.NewEmbedder(0)
	m := newMem(t, memory.Config{Embedder: emb})
	if _, err := m.Remember(bg, "alice", memory.Item{Text: "one"}, memory.Item{Text: "two"}, memory.Item{Text: "three"}); err != nil {
		t.Fatal(err)
	}
	if n := emb.Calls(); n != 1 {
		t.Errorf("Remember of 3 items: %d Embed calls, want 1", n)
	}
	if ids, err := m.Remember(bg, "alice"); err != nil || len(ids) != 0 {
		t.Fatalf("Remember of nothing = %v, %v", ids, err)
	}
	for _, q := range []string{"", "?!", "   "} {
		if _, err := m.Recall(bg, "alice", q, memory.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := emb.Calls(); n != 1 {
		t.Errorf("after a Remember of nothing and Recalls of no words: %d Embed calls, want 1", n)
	}
	for _, q := range []string{"one", "What is it?"} {
		if _, err := m.Recall(bg, "alice", q, memory.Budget{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := emb.Calls(); n != 3 {
		t.Errorf("after 2 Recalls: %d Embed calls, want 3", n)
	}
	// A Remember whose ctx ends during the embedding stores nothing.
	ctx, cancel := context.WithCancel(bg)
	cancelling := embedFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		cancel()
		return nil, ctx.Err()
	})
	m2 := newMem(t, memory.Config{Embedder: cancelling})
	if _, err := m2.Remember(ctx, "alice", memory.Item{Text: "dentist"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Remember cancelled while embedding: %v, want context.Canceled", err)
	}
	if got := recallTexts(t, m2, "alice", "dentist"); len(got) != 0 {
		t.Errorf("a cancelled Remember stored %q", got)
	}
}

type embedFunc func(ctx context.Context, texts []string) ([][]float32, error)

func (f embedFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

// TestInMemoryHybridCandidates: vector similarity reaches the
// RecentCandidates newest items (by CreatedAt, not by the order they
// were written) and the LexicalCandidates best lexical matches, or
// MaxEntries of them when that is more.
func TestInMemoryHybridCandidates(t *testing.T) {
	emb := llmtest.NewEmbedder(0).Concept("orthodontist", "teeth")
	m := newMem(t, memory.Config{Embedder: emb})
	const n = 150
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		// Alike "teeth" by vector only; "dentist" matches lexically.
		it := memory.Item{Text: "dentist orthodontist", CreatedAt: base.Add(time.Duration(i) * time.Minute)}
		if _, err := m.Remember(bg, "alice", it); err != nil {
			t.Fatal(err)
		}
	}
	got, err := m.Recall(bg, "alice", "teeth", memory.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != memory.RecentCandidates {
		t.Fatalf("a vector-only query recalls %d items, want the %d newest", len(got), memory.RecentCandidates)
	}
	oldest := base.Add((n - memory.RecentCandidates) * time.Minute)
	for i, it := range got {
		if it.CreatedAt.Before(oldest) {
			t.Fatalf("item %d was created at %v, before the %d newest", i, it.CreatedAt, memory.RecentCandidates)
		}
		if i > 0 && !it.CreatedAt.Before(got[i-1].CreatedAt) {
			t.Fatalf("equally similar items not newest first: %v then %v", got[i-1].CreatedAt, it.CreatedAt)
		}
	}
	for _, tc := range []struct {
		b    memory.Budget
		want int
	}{
		{memory.Budget{}, memory.LexicalCandidates},
		{memory.Budget{MaxEntries: 120}, 120},
		{memory.Budget{MaxEntries: 1000}, n},
	} {
		got, err := m.Recall(bg, "alice", "dentist", tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("Recall(dentist, %+v) = %d items, want %d", tc.b, len(got), tc.want)
		}
	}
}
