package pgmemory_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// walkItems are 200 items of one tenant, a minute apart, the newest last:
// "plumber" in every other one, "boiler" in every 5th, "dentist" in every
// 25th, "violin" in the two newest and in the 11th, "zebra" in the
// oldest alone, and filler words in all.
func walkItems() []memory.Item {
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	items := make([]memory.Item, 200)
	for i := range items {
		words := []string{fmt.Sprintf("note %d about the garden", i)}
		if i%2 == 0 {
			words = append(words, "plumber")
		}
		if i%5 == 0 {
			words = append(words, "boiler")
		}
		if i == 199 || i == 198 || i == 10 {
			words = append(words, "violin")
		}
		if i%25 == 0 {
			words = append(words, "dentist")
		}
		if i == 0 {
			words = append(words, "zebra")
		}
		items[i] = memory.Item{Text: strings.Join(words, " "), CreatedAt: base.Add(time.Duration(i) * time.Minute)}
	}
	return items
}

// newestMatches is the n newest of items (oldest first) holding word.
func newestMatches(items []memory.Item, word string, n int) []string {
	var out []string
	for i := len(items) - 1; i >= 0 && len(out) < n; i-- {
		if strings.Contains(items[i].Text, word) {
			out = append(out, items[i].Text)
		}
	}
	return out
}

// TestRecallPastTheWalk: Recall reads a tenant's newest items until it
// has RecallCandidates matches, 15 items per candidate at most; when a
// query's words are rarer than that, it reads every match by the index.
// Either way the candidates are the RecallCandidates newest matches. With
// 3 candidates the walk reads 45 items: it answers "plumber" (every other
// item) and "boiler" (every 5th); "violin" (the 2 newest and an old one),
// "dentist" (every 25th; 8 candidates: a walk of 120) and "zebra" (the
// oldest) need the index. In every query mode of pgx and with an Embedder
// (hybrid recall).
func TestRecallPastTheWalk(t *testing.T) {
	db := testDB(t)
	items := walkItems()
	for _, mode := range []string{"", "default_query_exec_mode=simple_protocol", "default_query_exec_mode=exec"} {
		pool := db
		if mode != "" {
			url := pgtest.URL(t)
			sep := "?"
			if strings.Contains(url, "?") {
				sep = "&"
			}
			var err error
			if pool, err = pgxpool.New(bg, url+sep+mode); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
		}
		schema := newSchema(t, pool)
		lexical := open(t, pool, pgmemory.Config{Schema: schema, RecallCandidates: 3})
		if _, err := lexical.Remember(bg, "t", items...); err != nil {
			t.Fatal(err)
		}
		// Another tenant's items, newer, holding every word: never recalled.
		if _, err := lexical.Remember(bg, "other", memory.Item{Text: "dentist plumber zebra garden", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		hybridP, err := pgmemory.New(pool, pgmemory.Config{Schema: schema, RecallCandidates: 3, Embedder: llmtest.NewEmbedder(8)})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			query string
			b     memory.Budget
			want  []string
		}{
			{"Who is my plumber?", memory.Budget{}, newestMatches(items, "plumber", 3)},              // the walk finds them
			{"Is the boiler fixed?", memory.Budget{}, newestMatches(items, "boiler", 3)},             // the walk
			{"Play the violin", memory.Budget{}, newestMatches(items, "violin", 3)},                  // the index
			{"Who is my dentist?", memory.Budget{}, newestMatches(items, "dentist", 3)},              // the index
			{"Where's the zebra?", memory.Budget{}, newestMatches(items, "zebra", 3)},                // the oldest item
			{"Who is my dentist?", memory.Budget{MaxEntries: 8}, newestMatches(items, "dentist", 8)}, // every match
			{"Who is my ocelot?", memory.Budget{}, nil},
		} {
			got, err := lexical.Recall(bg, "t", tc.query, tc.b)
			if err != nil {
				t.Fatalf("%s: Recall(%q): %v", mode, tc.query, err)
			}
			if !sameSet(texts(got), tc.want) {
				t.Errorf("%s: Recall(%q, %+v) = %q, want %q", mode, tc.query, tc.b, texts(got), tc.want)
			}
			// Hybrid: the lexical matches are among what it returns (the
			// newest items, by similarity, may come too).
			got, err = hybridP.Recall(bg, "t", tc.query, memory.Budget{})
			if err != nil {
				t.Fatalf("%s: hybrid Recall(%q): %v", mode, tc.query, err)
			}
			for _, w := range tc.want[:min(len(tc.want), 3)] {
				if !slices.Contains(texts(got), w) {
					t.Errorf("%s: hybrid Recall(%q) = %d items without %q", mode, tc.query, len(got), w)
				}
			}
		}
	}
}
