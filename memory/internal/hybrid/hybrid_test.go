package hybrid

import (
	"cmp"
	"math"
	"testing"
)

func TestCosine(t *testing.T) {
	for _, tc := range []struct {
		a, b []float32
		want float64
		ok   bool
	}{
		{[]float32{1, 0}, []float32{1, 0}, 1, true},
		{[]float32{1, 0}, []float32{0, 2}, 0, true},
		{[]float32{1, 1}, []float32{-2, -2}, -1, true},
		{[]float32{3, 4}, []float32{4, 3}, 24.0 / 25, true},
		{[]float32{1, 0}, []float32{1, 0, 0}, 0, false},
		{nil, nil, 0, false},
		{[]float32{0, 0}, []float32{1, 0}, 0, false},
		{[]float32{float32(math.Inf(1)), 0}, []float32{1, 0}, 0, false},
	} {
		got, ok := Cosine(tc.a, tc.b)
		if ok != tc.ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Cosine(%v, %v) = %v, %v; want %v, %v", tc.a, tc.b, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFuse(t *testing.T) {
	q := []float32{1, 0, 0}
	cands := []Candidate{
		{LexicalRank: 1}, // 0: lexical only, first
		{LexicalRank: 2, Vector: []float32{1, 1, 0}},   // 1: both
		{Vector: []float32{1, 0, 0}},                   // 2: vector only, most similar
		{Vector: []float32{0, 1, 0}},                   // 3: orthogonal: in no ranking
		{Vector: []float32{-1, 0, 0}},                  // 4: opposite: in no ranking
		{Vector: []float32{1, 0}},                      // 5: another length: in no ranking
		{},                                             // 6: nothing
		{LexicalRank: 3, Vector: []float32{1, 0.1, 0}}, // 7: both
	}
	got := Fuse(q, cands, func(a, b int) int { return cmp.Compare(a, b) })
	// Vector ranking: 2 (1.0), 7 (0.995), 1 (0.707): 1 and 7 tie, as do
	// 0 and 2.
	want := []Ranked{
		{1, 1.0/62 + 1.0/63},
		{7, 1.0/63 + 1.0/62},
		{0, 1.0 / 61},
		{2, 1.0 / 61},
	}
	if len(got) != len(want) {
		t.Fatalf("Fuse = %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Index != want[i].Index || math.Abs(got[i].Score-want[i].Score) > 1e-12 {
			t.Errorf("Fuse = %v, want %v", got, want)
			break
		}
	}
	// Equal scores follow tie: reversed, 7 before 1 and 2 before 0.
	got = Fuse(q, cands, func(a, b int) int { return cmp.Compare(b, a) })
	if len(got) != 4 || got[0].Index != 7 || got[1].Index != 1 || got[2].Index != 2 || got[3].Index != 0 {
		t.Errorf("with the tie reversed: %v", got)
	}
	if got := Fuse(nil, cands[:1], func(a, b int) int { return 0 }); len(got) != 1 || got[0].Index != 0 {
		t.Errorf("without a query vector: %v, want the lexical ranking", got)
	}
	if got := Fuse(q, nil, func(a, b int) int { return 0 }); len(got) != 0 {
		t.Errorf("no candidates: %v", got)
	}
}
