package memory

import (
	"cmp"
	"slices"

	"github.com/valetkit/valet/memory/internal/hybrid"
)

// The candidates of hybrid recall (see the package documentation): the
// vector similarity to the query is computed, in Go, for the best lexical
// matches and the newest items of the tenant, never for all its items.
// Both providers use these bounds.
const (
	// LexicalCandidates is how many of the best lexical matches hybrid
	// recall considers, or Budget.MaxEntries when that is larger.
	LexicalCandidates = 100
	// RecentCandidates is how many of the tenant's newest items (by
	// CreatedAt, then the later written) hybrid recall considers besides
	// the lexical matches, so that an item sharing no word with the
	// query may be found by similarity alone.
	RecentCandidates = 100
)

// hit is an item matching a query, with its relevance.
type hit struct {
	s     *storedItem
	score float64
}

// compareHits orders hits by score, then newest first.
func compareHits(a, b hit) int {
	return cmp.Or(cmp.Compare(b.score, a.score), compareNewest(a.s, b.s))
}

// compareNewest orders items newest first: by CreatedAt, then the later
// written.
func compareNewest(a, b *storedItem) int {
	return cmp.Or(b.item.CreatedAt.Compare(a.item.CreatedAt), compareIDs(b.item.ID, a.item.ID))
}

// fuse merges the lexical hits (best first) with the vector ranking of
// the candidates (the best LexicalCandidates lexical hits, or
// b.MaxEntries, and the RecentCandidates newest items; those less similar
// than minSimilarity left out of it) by reciprocal rank fusion, and
// returns the fused hits, best first. itemMu is held.
func (t *tenantItems) fuse(lexical []hit, query []float32, minSimilarity float64, b Budget) []hit {
	lexical = lexical[:min(len(lexical), max(LexicalCandidates, b.MaxEntries))]
	items := make([]*storedItem, 0, len(lexical)+RecentCandidates)
	cands := make([]hybrid.Candidate, 0, len(lexical)+RecentCandidates)
	in := make(map[*storedItem]bool, len(lexical))
	for i, h := range lexical {
		items = append(items, h.s)
		cands = append(cands, hybrid.Candidate{LexicalRank: i + 1, Vector: h.s.vec})
		in[h.s] = true
	}
	for _, s := range t.newest(RecentCandidates) {
		if !in[s] {
			items = append(items, s)
			cands = append(cands, hybrid.Candidate{Vector: s.vec})
		}
	}
	ranked := hybrid.FuseAbove(query, cands, minSimilarity, func(a, b int) int { return compareNewest(items[a], items[b]) })
	out := make([]hit, len(ranked))
	for i, r := range ranked {
		out[i] = hit{items[r.Index], r.Score}
	}
	return out
}

// newest returns the tenant's n newest items (by CreatedAt, then the
// later written) that no item supersedes, newest first. itemMu is held.
func (t *tenantItems) newest(n int) []*storedItem {
	all := make([]*storedItem, 0, t.order.Len())
	for e := t.order.Front(); e != nil; e = e.Next() {
		if s := e.Value.(*storedItem); t.hidden[s.item.ID] == 0 {
			all = append(all, s)
		}
	}
	slices.SortFunc(all, compareNewest)
	return all[:min(n, len(all))]
}

// take walks hits, best first, and returns the items that fit b, with
// their scores.
func take(hits []hit, b Budget) []Item {
	var out []Item
	tokens := 0
	for _, h := range hits {
		if b.MaxEntries > 0 && len(out) == b.MaxEntries {
			break
		}
		it := h.s.item
		if b.MaxTokens > 0 && tokens+it.Tokens > b.MaxTokens {
			continue // too large for what remains; a smaller one may fit
		}
		tokens += it.Tokens
		it.Score = h.score
		out = append(out, it)
	}
	return out
}
