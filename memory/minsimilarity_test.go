package memory_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
)

// TestInMemoryMinSimilarity: with MinSimilarity, an item less similar to
// the query than it is not recalled by similarity alone, but still as a
// lexical match; without it, any positive similarity counts. As in
// memory/pgmemory.
func TestInMemoryMinSimilarity(t *testing.T) {
	emb := llmtest.NewEmbedder(0).Concept("dentist", "teeth")
	strong := "dentist Kim"
	weak := "dentist visit after the boiler repair, the garage sale and the school concert"
	vecs, err := emb.Embed(bg, []string{"Who fixes my teeth?", strong, weak})
	if err != nil {
		t.Fatal(err)
	}
	hi, _ := hybrid.Cosine(vecs[0], vecs[1])
	lo, _ := hybrid.Cosine(vecs[0], vecs[2])
	if !(lo > 0 && lo < hi) {
		t.Fatalf("similarities %v (strong), %v (weak): the test needs 0 < weak < strong", hi, lo)
	}
	for _, tc := range []struct {
		min   float64
		query string
		want  []string
	}{
		{0, "Who fixes my teeth?", []string{strong, weak}},
		{(hi + lo) / 2, "Who fixes my teeth?", []string{strong}},
		{(hi + lo) / 2, "Who fixes my teeth? Also the boiler.", []string{strong, weak}}, // weak is a lexical match
	} {
		m := newMem(t, memory.Config{Embedder: emb, MinSimilarity: tc.min})
		if _, err := m.Remember(bg, "t", memory.Item{Text: strong}, memory.Item{Text: weak}, memory.Item{Text: "pizza on Friday"}); err != nil {
			t.Fatal(err)
		}
		got, err := m.Recall(bg, "t", tc.query, memory.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		var texts []string
		for _, it := range got {
			texts = append(texts, it.Text)
		}
		slices.Sort(texts)
		slices.Sort(tc.want)
		if !slices.Equal(texts, tc.want) {
			t.Errorf("MinSimilarity %.3f, Recall(%q) = %q, want %q", tc.min, tc.query, texts, tc.want)
		}
	}
	for _, bad := range []float64{-0.1, 1.01, math.NaN()} {
		if _, err := memory.NewInMemory(memory.Config{MinSimilarity: bad}); !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("NewInMemory(MinSimilarity %v) = %v, want memory.ErrInvalid", bad, err)
		}
	}
}
