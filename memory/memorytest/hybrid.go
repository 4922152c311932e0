package memorytest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// NewHybridProvider makes an empty provider for one subtest, like
// [NewProvider], that embeds with e (its Embedder option).
type NewHybridProvider = func(t *testing.T, e llm.Embedder) memory.Provider

// RunHybrid checks hybrid recall, for providers made with an
// llm.Embedder: a query sharing no word with an item finds it by vector
// similarity alone; the lexical and vector rankings merge by reciprocal
// rank fusion, within the budget; a query with no lexical word is
// answered by similarity; an embedder that fails, or returns vectors
// that do not answer its texts, at Remember or at Recall leaves lexical
// recall as it is without one, and items stored without vectors stay
// recallable lexically; tenant isolation and Supersedes hold for vector
// matches; concurrent use. Each check is a parallel subtest with a
// provider and an llmtest.Embedder of its own.
//
// Run the suite as well, on providers without an Embedder: with one,
// some of Run's checks (an unrelated query recalling nothing) need not
// hold.
func RunHybrid(t *testing.T, newProvider NewHybridProvider) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, newProvider NewHybridProvider)
	}{
		{"VectorOnlyMatch", testVectorOnlyMatch},
		{"Fusion", testFusion},
		{"NoLexicalWord", testNoLexicalWord},
		{"EmbedderFails", testEmbedderFails},
		{"BadVectors", testBadVectors},
		{"TenantIsolation", testHybridTenantIsolation},
		{"Supersedes", testHybridSupersedes},
		{"Concurrent", testHybridConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newProvider)
		})
	}
}

// teethEmbedder is an embedder for which "teeth" is alike "dentist".
func teethEmbedder() *llmtest.Embedder {
	return llmtest.NewEmbedder(0).Concept("dentist", "teeth")
}

// teethQuery shares no word with any of facts (after normalisation)
// but is alike facts 0 and 3 for teethEmbedder.
const teethQuery = "Who fixes my teeth?"

// wantTexts checks that got holds exactly want's texts, in any order,
// with positive scores, most relevant first.
func wantTexts(t *testing.T, what string, got []memory.Item, want ...string) {
	t.Helper()
	if !sameSet(texts(got), want) {
		t.Errorf("%s = %q, want %q", what, texts(got), want)
	}
	checkScores(t, what, got)
}

func testVectorOnlyMatch(t *testing.T, newProvider NewHybridProvider) {
	p := newProvider(t, teethEmbedder())
	rememberFacts(t, p, "alice")
	wantTexts(t, "Recall("+teethQuery+")", recall(t, p, "alice", teethQuery, memory.Budget{}), facts[0], facts[3])
	// Lexical matches are still found, and nothing alike neither way is.
	wantTexts(t, "Recall(marathon)", recall(t, p, "alice", "marathon", memory.Budget{}), facts[4])
	wantTexts(t, "Recall(zebra giraffe)", recall(t, p, "alice", "zebra giraffe", memory.Budget{}))
}

func testFusion(t *testing.T, newProvider NewHybridProvider) {
	emb := llmtest.NewEmbedder(0).Concept("dentist", "orthodontist").Concept("appointment", "visit")
	p := newProvider(t, emb)
	const (
		both    = "Dentist appointment on Friday at nine."                          // lexical 1st (both words), vector 1st
		vector  = "The orthodontist visit is booked for early May."                 // no word of the query: vector 2nd
		oneWord = "The plumber appointment moved to Monday afternoon, after lunch." // lexical 2nd (one word), vector 3rd
		neither = "The user likes green tea."
	)
	remember(t, p, "alice", memory.Item{Text: oneWord}, memory.Item{Text: neither}, memory.Item{Text: vector}, memory.Item{Text: both})
	// Reciprocal rank fusion: both 1/61 + 1/61, oneWord 1/62 + 1/63,
	// vector 1/62. oneWord, in both rankings, passes vector, which is
	// more alike the query but not a lexical match.
	got := recall(t, p, "alice", "dentist appointment", memory.Budget{})
	if want := []string{both, oneWord, vector}; !slices.Equal(texts(got), want) {
		t.Errorf("Recall(dentist appointment) = %q, want %q", texts(got), want)
	}
	checkScores(t, "dentist appointment", got)
	if len(got) == 3 && (got[1].Score <= got[2].Score || got[0].Score <= got[1].Score) {
		t.Errorf("scores %v, %v, %v: want strictly decreasing", got[0].Score, got[1].Score, got[2].Score)
	}

	// The budget applies to the fused ranking.
	got = recall(t, p, "alice", "dentist appointment", memory.Budget{MaxEntries: 2})
	if want := []string{both, oneWord}; !slices.Equal(texts(got), want) {
		t.Errorf("MaxEntries 2: %q, want %q", texts(got), want)
	}
	// oneWord (21 tokens) does not fit what remains after both (13):
	// skipped, and vector (16) is taken.
	b := memory.Budget{MaxTokens: memory.EstimateTokens(both) + memory.EstimateTokens(vector)}
	got = recall(t, p, "alice", "dentist appointment", b)
	if want := []string{both, vector}; !slices.Equal(texts(got), want) {
		t.Errorf("MaxTokens %d: %q, want %q", b.MaxTokens, texts(got), want)
	}

	// The two rankings weigh the same: the first lexical match (stored
	// while the embedder failed, so without a vector) and the first
	// vector match (no word of the query) score alike, and the newer
	// comes first.
	emb.Fail(&llm.Error{Kind: llm.KindUnavailable})
	lexicalOnly := "The plumber is Sam."
	remember(t, p, "bob", memory.Item{Text: lexicalOnly})
	emb.Fail(nil)
	vectorOnly := "The orthodontist is Dr. Lee."
	remember(t, p, "bob", memory.Item{Text: vectorOnly})
	got = recall(t, p, "bob", "plumber dentist", memory.Budget{})
	if want := []string{vectorOnly, lexicalOnly}; !slices.Equal(texts(got), want) {
		t.Errorf("bob: Recall(plumber dentist) = %q, want %q", texts(got), want)
	}
	if len(got) == 2 && got[0].Score != got[1].Score {
		t.Errorf("bob: scores %v and %v, want equal", got[0].Score, got[1].Score)
	}
}

func testNoLexicalWord(t *testing.T, newProvider NewHybridProvider) {
	p := newProvider(t, llmtest.NewEmbedder(0).Concept("where", "lives"))
	rememberFacts(t, p, "alice")
	home := "The user lives at Rua Augusta 12, Lisbon."
	remember(t, p, "alice", memory.Item{Text: home})
	// "Where?" has no word once stop words are dropped: lexically it
	// recalls nothing, by similarity it finds the item.
	wantTexts(t, "Recall(Where?)", recall(t, p, "alice", "Where?", memory.Budget{}), home)
	for _, q := range []string{"", "   ", "?!... ---"} {
		got, err := p.Recall(bg, "alice", q, memory.Budget{})
		if err != nil || len(got) != 0 {
			t.Errorf("Recall(%q) = %q, %v; want nothing, nil", q, texts(got), err)
		}
	}
}

func testEmbedderFails(t *testing.T, newProvider NewHybridProvider) {
	emb := teethEmbedder()
	p := newProvider(t, emb)
	emb.Fail(&llm.Error{Kind: llm.KindUnavailable, Message: "embeddings are down"})

	// Remember stores the items anyway, without vectors.
	ids := rememberFacts(t, p, "alice")
	if len(ids) != len(facts) {
		t.Fatalf("Remember while the embedder fails returned %d IDs", len(ids))
	}
	// Recall answers lexically, as without an embedder.
	wantRecall(t, p, "What's my dentist's name again?", 0, 3)
	wantRecall(t, p, "flight", 1)
	wantRecall(t, p, teethQuery)

	// Once the embedder is back, the items stored without vectors are
	// still recalled lexically, and only by that.
	emb.Fail(nil)
	wantRecall(t, p, "dentist", 0, 3)
	wantRecall(t, p, teethQuery)
	moved := "The user's dentist moved to Porto."
	remember(t, p, "alice", memory.Item{Text: moved})
	wantTexts(t, "Recall("+teethQuery+")", recall(t, p, "alice", teethQuery, memory.Budget{}), moved)
	wantTexts(t, "Recall(dentist)", recall(t, p, "alice", "dentist", memory.Budget{}), facts[0], facts[3], moved)

	// Failing at Recall only: lexical recall again.
	emb.Fail(&llm.Error{Kind: llm.KindRateLimited})
	wantTexts(t, "Recall(dentist)", recall(t, p, "alice", "dentist", memory.Budget{}), facts[0], facts[3], moved)
	wantTexts(t, "Recall("+teethQuery+")", recall(t, p, "alice", teethQuery, memory.Budget{}))

	// Items without vectors keep their lexical order when the query has
	// a vector: the better match first, though older.
	better, newer := "The user's passport number ends in 42.", "The passport office closes at five."
	remember(t, p, "carol", memory.Item{Text: better})
	remember(t, p, "carol", memory.Item{Text: newer})
	emb.Fail(nil)
	got := recall(t, p, "carol", "passport number", memory.Budget{})
	if want := []string{better, newer}; !slices.Equal(texts(got), want) {
		t.Errorf("carol: Recall(passport number) = %q, want %q", texts(got), want)
	}
	if len(got) == 2 && got[0].Score <= got[1].Score {
		t.Errorf("carol: scores %v, %v; want the first higher", got[0].Score, got[1].Score)
	}
}

// embedFunc is an llm.Embedder made of a function.
type embedFunc func(ctx context.Context, texts []string) ([][]float32, error)

func (f embedFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

func testBadVectors(t *testing.T, newProvider NewHybridProvider) {
	good := teethEmbedder()
	for _, tc := range []struct {
		name string
		fn   embedFunc
	}{
		{"one vector short", func(ctx context.Context, texts []string) ([][]float32, error) {
			v, err := good.Embed(ctx, texts)
			return v[:len(v)-1], err
		}},
		{"one vector too many", func(ctx context.Context, texts []string) ([][]float32, error) {
			v, err := good.Embed(ctx, texts)
			return append(v, v[0]), err
		}},
		{"lengths differ", func(ctx context.Context, texts []string) ([][]float32, error) {
			v, err := good.Embed(ctx, texts)
			v[len(v)-1] = append(v[len(v)-1], 1)
			return v, err
		}},
		{"empty vectors", func(ctx context.Context, texts []string) ([][]float32, error) {
			return make([][]float32, len(texts)), nil
		}},
		{"nil, nil", func(ctx context.Context, texts []string) ([][]float32, error) { return nil, nil }},
		{"query of another length", func(ctx context.Context, texts []string) ([][]float32, error) {
			v, err := good.Embed(ctx, texts)
			if len(texts) == 1 { // the query: half its length
				v[0] = v[0][:len(v[0])/2]
			}
			return v, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t, tc.fn)
			rememberFacts(t, p, "alice")
			wantRecall(t, p, "What's my dentist's name again?", 0, 3)
			wantRecall(t, p, teethQuery)
			wantRecall(t, p, "zebra")
		})
	}
}

func testHybridTenantIsolation(t *testing.T, newProvider NewHybridProvider) {
	p := newProvider(t, teethEmbedder())
	dentist := "The user's dentist is Dr. Kim."
	remember(t, p, "alice", memory.Item{Text: dentist})
	remember(t, p, "bob", memory.Item{Text: "The user's cat is Tom."})
	wantTexts(t, "alice: Recall("+teethQuery+")", recall(t, p, "alice", teethQuery, memory.Budget{}), dentist)
	wantTexts(t, "bob: Recall("+teethQuery+")", recall(t, p, "bob", teethQuery, memory.Budget{}))
	wantTexts(t, "carol: Recall("+teethQuery+")", recall(t, p, "carol", teethQuery, memory.Budget{}))
}

func testHybridSupersedes(t *testing.T, newProvider NewHybridProvider) {
	p := newProvider(t, teethEmbedder())
	old := remember(t, p, "alice", memory.Item{Text: "The user's dentist is Dr. Kim."})
	newer := "The user's dentist is now Dr. Lee."
	remember(t, p, "alice", memory.Item{Text: newer, Supersedes: old[0]})
	wantTexts(t, "Recall("+teethQuery+")", recall(t, p, "alice", teethQuery, memory.Budget{}), newer)
	wantTexts(t, "Recall(Kim teeth)", recall(t, p, "alice", "Kim teeth", memory.Budget{}), newer)
}

func testHybridConcurrent(t *testing.T, newProvider NewHybridProvider) {
	p := newProvider(t, teethEmbedder())
	const writers, items = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range items {
				if _, err := p.Remember(bg, "alice", memory.Item{Text: fmt.Sprintf("dentist note %d of writer %d", i, w)}); err != nil {
					t.Error(err)
					return
				}
				if _, err := p.Recall(bg, "alice", teethQuery, memory.Budget{MaxEntries: 3}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := recall(t, p, "alice", teethQuery, memory.Budget{}); len(got) != writers*items {
		t.Errorf("Recall finds %d of the %d concurrent items", len(got), writers*items)
	}
}
