// Package hybrid is the part of hybrid recall the memory providers share:
// cosine similarity and reciprocal rank fusion of a lexical ranking with
// a vector ranking.
package hybrid

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/valetkit/valet/llm"
)

// K is the constant of reciprocal rank fusion: a candidate at rank r (1
// for the first) of a ranking adds 1/(K+r) to its score. 60 is the value
// of the paper that introduced the method (Cormack, Clarke and Büttcher,
// 2009) and of most systems since.
const K = 60

// Candidate is one item hybrid recall considers.
type Candidate struct {
	// LexicalRank is the item's place in the lexical ranking, 1 for the
	// best match; 0 when it is not a lexical match.
	LexicalRank int
	// Vector is the item's embedding; nil when it has none.
	Vector []float32
}

// Ranked is a candidate's place in the fused ranking.
type Ranked struct {
	Index int     // into the candidates given to Fuse
	Score float64 // the sum of 1/(K+rank) over the rankings that hold it
}

// Fuse ranks cands by reciprocal rank fusion of their lexical ranks and
// their vector ranks. The vector ranking holds the candidates whose
// cosine similarity to query is positive, most similar first; a candidate
// without a vector, or with one of another length than query's, is not in
// it. Candidates in neither ranking are left out. tie orders candidates of
// equal similarity or score like cmp.Compare (negative: a first); it
// should give a total order.
func Fuse(query []float32, cands []Candidate, tie func(a, b int) int) []Ranked {
	return FuseAbove(query, cands, 0, tie)
}

// FuseAbove is Fuse with a floor: the vector ranking holds only the
// candidates whose cosine similarity to query is positive and at least
// minSimilarity. A candidate below it is still ranked by its lexical
// rank, when it has one.
func FuseAbove(query []float32, cands []Candidate, minSimilarity float64, tie func(a, b int) int) []Ranked {
	type similar struct {
		i int
		s float64
	}
	var sims []similar
	for i, c := range cands {
		if s, ok := Cosine(query, c.Vector); ok && s > 0 && s >= minSimilarity {
			sims = append(sims, similar{i, s})
		}
	}
	slices.SortFunc(sims, func(a, b similar) int { return cmp.Or(cmp.Compare(b.s, a.s), tie(a.i, b.i)) })
	scores := make([]float64, len(cands))
	for i, c := range cands {
		if c.LexicalRank > 0 {
			scores[i] += 1 / float64(K+c.LexicalRank)
		}
	}
	for r, s := range sims {
		scores[s.i] += 1 / float64(K+r+1)
	}
	var out []Ranked
	for i, s := range scores {
		if s > 0 {
			out = append(out, Ranked{Index: i, Score: s})
		}
	}
	slices.SortFunc(out, func(a, b Ranked) int { return cmp.Or(cmp.Compare(b.Score, a.Score), tie(a.Index, b.Index)) })
	return out
}

// Cosine returns the cosine similarity of a and b, and false when it is
// not defined: vectors of different lengths, empty, or of length zero.
func Cosine(a, b []float32) (float64, bool) {
	if len(a) == 0 || len(a) != len(b) {
		return 0, false
	}
	var dot, na, nb float64
	for i, x := range a {
		y := float64(b[i])
		dot += float64(x) * y
		na += float64(x) * float64(x)
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0, false
	}
	s := dot / math.Sqrt(na*nb)
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return 0, false
	}
	return s, true
}

// HasWord reports whether text holds a letter or a digit: a query worth
// embedding. A query of punctuation alone is not.
func HasWord(text string) bool {
	return strings.IndexFunc(text, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// Embed returns the vectors of texts from e, or nil when there are no
// texts, e is nil, e fails, or e returns vectors that do not answer the
// texts (llm.CheckEmbeddings): every failure means "no vectors".
func Embed(ctx context.Context, e llm.Embedder, texts []string) [][]float32 {
	if e == nil || len(texts) == 0 {
		return nil
	}
	vecs, err := e.Embed(ctx, texts)
	if err != nil || llm.CheckEmbeddings(len(texts), vecs) != nil {
		return nil
	}
	return vecs
}
