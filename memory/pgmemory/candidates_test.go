package pgmemory_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
	"github.com/valetkit/valet/memory/pgmemory"
)

// TestRecallCandidatesNewest: Recall ranks the RecallCandidates newest
// matches (by CreatedAt), or MaxEntries of them when more: an older match
// is left out however well it ranks.
func TestRecallCandidatesNewest(t *testing.T) {
	db := testDB(t)
	p := open(t, db, pgmemory.Config{RecallCandidates: 3})
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	items := []memory.Item{
		{Text: "dentist dentist dentist Kim, the best match", CreatedAt: base},
		{Text: "dentist on Monday", CreatedAt: base.Add(4 * time.Hour)},
		{Text: "dentist on Tuesday", CreatedAt: base.Add(3 * time.Hour)},
		{Text: "dentist on Wednesday", CreatedAt: base.Add(2 * time.Hour)},
		{Text: "dentist on Thursday", CreatedAt: base.Add(time.Hour)},
		{Text: "plumber", CreatedAt: base.Add(5 * time.Hour)},
	}
	if _, err := p.Remember(bg, "t", items...); err != nil {
		t.Fatal(err)
	}
	got, err := p.Recall(bg, "t", "Is my dentist appointment on Thursday?", memory.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dentist on Monday", "dentist on Tuesday", "dentist on Wednesday"}; !sameSet(texts(got), want) {
		t.Errorf("Recall with 3 candidates = %q, want the 3 newest matches %q", texts(got), want)
	}
	got, err = p.Recall(bg, "t", "Is my dentist appointment on Thursday?", memory.Budget{MaxEntries: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].Text != items[0].Text && got[0].Text != items[4].Text {
		t.Errorf("Recall with MaxEntries 10 = %q, want all 5 matches, the best ranked first", texts(got))
	}
}

// TestMinSimilarity: with MinSimilarity, an item less similar to the
// query than it is not recalled by similarity alone, but still as a
// lexical match; without it, any positive similarity counts.
func TestMinSimilarity(t *testing.T) {
	db := testDB(t)
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
	floor := (hi + lo) / 2
	for _, tc := range []struct {
		min   float64
		query string
		want  []string
	}{
		{0, "Who fixes my teeth?", []string{strong, weak}},
		{floor, "Who fixes my teeth?", []string{strong}},
		{floor, "Who fixes my teeth? Also the boiler.", []string{strong, weak}}, // weak is a lexical match
	} {
		schema := newSchema(t, db)
		p := open(t, db, pgmemory.Config{Schema: schema, Embedder: emb, MinSimilarity: tc.min})
		if _, err := p.Remember(bg, "t", memory.Item{Text: strong}, memory.Item{Text: weak}, memory.Item{Text: "pizza on Friday"}); err != nil {
			t.Fatal(err)
		}
		got, err := p.Recall(bg, "t", tc.query, memory.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		if !sameSet(texts(got), tc.want) {
			t.Errorf("MinSimilarity %.3f, Recall(%q) = %q, want %q", tc.min, tc.query, texts(got), tc.want)
		}
	}
}

func TestNewRejectsRecallSettings(t *testing.T) {
	db, err := pgxpool.New(bg, "postgres://nobody@127.0.0.1:1/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		cfg  pgmemory.Config
		want string
	}{
		{pgmemory.Config{RecallCandidates: -1}, "RecallCandidates"},
		{pgmemory.Config{MinSimilarity: -0.1}, "MinSimilarity"},
		{pgmemory.Config{MinSimilarity: 1.5}, "MinSimilarity"},
		{pgmemory.Config{MinSimilarity: math.NaN()}, "MinSimilarity"},
	} {
		if _, err := pgmemory.New(db, tc.cfg); err == nil || !errors.Is(err, memory.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v; want memory.ErrInvalid naming %s", tc.cfg, err, tc.want)
		}
	}
	if _, err := pgmemory.New(db, pgmemory.Config{MinSimilarity: 1, RecallCandidates: 1}); err != nil {
		t.Errorf("New with MinSimilarity 1: %v", err)
	}
}

func texts(items []memory.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Text
	}
	return out
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestQueryExecModes: a pool whose default mode plans every statement
// (exec, simple protocol: as behind PgBouncer) or has no description
// cache serves every method; Recall's statements run in it.
func TestQueryExecModes(t *testing.T) {
	for _, param := range []string{"default_query_exec_mode=exec", "default_query_exec_mode=simple_protocol", "description_cache_capacity=0"} {
		url := pgtest.URL(t)
		sep := "?"
		if strings.Contains(url, "?") {
			sep = "&"
		}
		db, err := pgxpool.New(bg, url+sep+param)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(db.Close)
		p := open(t, db, pgmemory.Config{Embedder: llmtest.NewEmbedder(8)})
		if _, err := p.Remember(bg, "t", memory.Item{Text: "The user's dentist is Dr Kim."}); err != nil {
			t.Fatalf("%s: Remember: %v", param, err)
		}
		got, err := p.Recall(bg, "t", "who's my dentist? it's O'Brien's \\ question", memory.Budget{MaxEntries: 3})
		if err != nil || len(got) != 1 {
			t.Errorf("%s: Recall = %q, %v", param, texts(got), err)
		}
		if err := p.Append(bg, "t", "c", llm.UserMessage("hi"), llm.AssistantMessage("hello")); err != nil {
			t.Errorf("%s: Append: %v", param, err)
		}
		if h, err := p.History(bg, "t", "c", 0); err != nil || len(h) != 2 {
			t.Errorf("%s: History = %d messages, %v", param, len(h), err)
		}
	}
}
