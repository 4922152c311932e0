package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// Embedder turns texts into vectors whose cosine similarity says how
// close their meanings are; memory providers use one for vector recall.
// Implementations must be safe for concurrent use and must honour ctx
// cancellation.
//
// Embed returns one vector per text, in the order of texts, all of one
// length (the model's dimensions); [CheckEmbeddings] checks a result is
// so. An empty texts gives nil, nil. Failures follow the error kinds of
// [Client]: an [*Error] carrying an [ErrorKind] (check it with [KindOf]),
// or an error for which errors.Is(err, context.Canceled) holds when ctx
// was cancelled. texts belongs to the caller: an Embedder does not modify
// it nor keep it after the call returns. The vectors returned are the
// caller's to keep: an Embedder does not change them afterwards (one that
// caches hands out copies).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// ErrInvalidEmbeddings is returned by [CheckEmbeddings] (wrapped with
// details) for vectors that do not answer the texts given: not one per
// text, of different lengths, empty, or holding NaN or an infinity.
var ErrInvalidEmbeddings = errors.New("llm: embeddings do not match the texts")

// CheckEmbeddings verifies that vecs can be what an [Embedder] returned
// for n texts: exactly n vectors, none empty, all of the same length,
// every value finite. Callers of an Embedder they do not control check
// its results with it before using them.
func CheckEmbeddings(n int, vecs [][]float32) error {
	if len(vecs) != n {
		return fmt.Errorf("%w: %d vectors for %d texts", ErrInvalidEmbeddings, len(vecs), n)
	}
	for i, v := range vecs {
		if len(v) == 0 {
			return fmt.Errorf("%w: vector %d is empty", ErrInvalidEmbeddings, i)
		}
		if len(v) != len(vecs[0]) {
			return fmt.Errorf("%w: vector %d has %d dimensions, vector 0 has %d", ErrInvalidEmbeddings, i, len(v), len(vecs[0]))
		}
		for j, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%w: vector %d holds %v at %d", ErrInvalidEmbeddings, i, x, j)
			}
		}
	}
	return nil
}
