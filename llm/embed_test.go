package llm

import (
	"errors"
	"math"
	"testing"
)

func TestCheckEmbeddings(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(-1))
	for _, tc := range []struct {
		name string
		n    int
		vecs [][]float32
		ok   bool
	}{
		{"none for none", 0, nil, true},
		{"one per text", 2, [][]float32{{1, 0}, {0, 1}}, true},
		{"zero vector", 1, [][]float32{{0, 0, 0}}, true},
		{"too few", 3, [][]float32{{1}, {1}}, false},
		{"too many", 1, [][]float32{{1}, {1}}, false},
		{"some for none", 0, [][]float32{{1}}, false},
		{"empty vector", 2, [][]float32{{1}, {}}, false},
		{"nil vector", 1, [][]float32{nil}, false},
		{"lengths differ", 3, [][]float32{{1, 2}, {1, 2}, {1, 2, 3}}, false},
		{"NaN", 1, [][]float32{{1, nan}}, false},
		{"infinity", 2, [][]float32{{1, 2}, {inf, 0}}, false},
	} {
		err := CheckEmbeddings(tc.n, tc.vecs)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalidEmbeddings) {
			t.Errorf("%s: %v, want ErrInvalidEmbeddings", tc.name, err)
		}
	}
}
