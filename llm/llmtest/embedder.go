package llmtest

import (
	"context"
	"hash/fnv"
	"math"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/valetkit/valet/llm"
)

// DefaultEmbedderDims is the length of the vectors of NewEmbedder(0).
const DefaultEmbedderDims = 1024

// Embedder is a deterministic [llm.Embedder] for tests: texts that share
// words get similar vectors, texts that share none get orthogonal ones
// (unless two of their words share a dimension by chance, see below), and
// [Embedder.Concept] makes chosen words alike, so a test can have a query
// found by similarity alone ("who fixes my teeth?" finding "The user's
// dentist is Dr. Kim").
//
// A text's vector is built by feature hashing: the text is split into
// runs of letters and digits, lowercased; one-letter words and a few
// dozen very common English words ("the", "is", "my", "what"...) are
// ignored unless a concept names them; each other word adds 1 to the
// dimension its FNV-1a hash picks, or to its concept's dimension; the
// vector is then scaled to length 1. A text without such words gets the
// zero vector, similar to nothing. Words are not stemmed: "dentist" and
// "dentists" are two words (make them a concept to join them).
//
// With dims dimensions, two distinct words share one with probability
// 1/dims; the same words always do, so a test that passes once always
// passes. Use more dimensions for large vocabularies.
//
// An Embedder is safe for concurrent use. [Embedder.Fail] makes it fail,
// for tests of what callers do then, and [Embedder.Calls] counts its
// calls.
type Embedder struct {
	dims int

	mu       sync.Mutex
	concepts map[string]string // word → the concept's key
	err      error
	calls    int
}

var _ llm.Embedder = (*Embedder)(nil)

// NewEmbedder returns an Embedder of vectors of dims dimensions (zero or
// less: DefaultEmbedderDims).
func NewEmbedder(dims int) *Embedder {
	if dims <= 0 {
		dims = DefaultEmbedderDims
	}
	return &Embedder{dims: dims, concepts: make(map[string]string)}
}

// Dims returns the length of the vectors.
func (e *Embedder) Dims() int { return e.dims }

// Concept makes words one concept: each adds to the same dimension, so
// texts using different words of it are as similar as texts using the
// same word. Words are matched lowercased, whole; a word given to two
// concepts belongs to the later one. A common word that is otherwise
// ignored counts once a concept names it. Concept returns e, so calls
// chain:
//
//	emb := llmtest.NewEmbedder(0).Concept("dentist", "teeth", "orthodontist")
func (e *Embedder) Concept(words ...string) *Embedder {
	if len(words) == 0 {
		return e
	}
	key := "\x00concept:" + strings.ToLower(words[0])
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, w := range words {
		e.concepts[strings.ToLower(w)] = key
	}
	return e
}

// Fail makes every later Embed call return err, until Fail(nil).
func (e *Embedder) Fail(err error) {
	e.mu.Lock()
	e.err = err
	e.mu.Unlock()
}

// Calls returns how many times Embed was called, failed calls included.
func (e *Embedder) Calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls
}

// Embed returns the vector of each text, in order; see [Embedder]. It
// returns ctx.Err() when ctx is done, the error given to [Embedder.Fail]
// when there is one, and nil, nil for no texts.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.err != nil {
		return nil, e.err
	}
	if len(texts) == 0 {
		return nil, nil
	}
	out := make([][]float32, len(texts))
	for i, text := range texts {
		out[i] = e.vector(text)
	}
	return out, nil
}

// vector embeds one text. e.mu is held.
func (e *Embedder) vector(text string) []float32 {
	v := make([]float32, e.dims)
	for f := range strings.FieldsFuncSeq(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		w := strings.ToLower(f)
		key, ok := e.concepts[w]
		if !ok {
			if commonWords[w] || utf8.RuneCountInString(w) < 2 {
				continue
			}
			key = w
		}
		h := fnv.New32a()
		h.Write([]byte(key))
		v[h.Sum32()%uint32(e.dims)]++
	}
	normalize(v)
	return v
}

// normalize scales v to length 1 (a zero vector stays zero).
func normalize(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum > 0 {
		k := float32(1 / math.Sqrt(sum))
		for i := range v {
			v[i] *= k
		}
	}
}

// commonWords are ignored by the Embedder unless a concept names them:
// words most texts hold, which would make everything alike.
var commonWords = func() map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(`a an the and or but of to in on at by for from with about as into
		is are was were be been being am do does did has have had will would can could should
		i me my mine you your yours we our us he him his she her hers it its they them their
		this that these those what which who whom when where why how there here again also
		not no so than then too very just all any some`) {
		m[w] = true
	}
	return m
}()
