package sqlitememory_test

import (
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

// candidateItems remembers, one Remember each (so in this order), 10
// items sharing "dentist" — the first and oldest the best match, the word
// three times — then the newest match superseded by an item without the
// word. It returns the texts of the matches, oldest first.
func candidateItems(t *testing.T, p *sqlitememory.Provider, tenant string) []string {
	t.Helper()
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var texts []string
	var newest string
	for i := range 10 {
		text := fmt.Sprintf("dentist visit number %d", i)
		if i == 0 {
			text = "dentist dentist dentist Kim, the best match"
		}
		ids, err := p.Remember(bg, tenant, memory.Item{Text: text, CreatedAt: base.Add(time.Duration(i) * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		texts, newest = append(texts, text), ids[0]
	}
	if _, err := p.Remember(bg, tenant, memory.Item{Text: "that one was cancelled", Supersedes: newest, CreatedAt: base.Add(20 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return texts
}

// TestRecallCandidatesNewest: Recall ranks only the RecallCandidates
// newest matches of the tenant that no item supersedes (or MaxEntries of
// them when more): an older match is left out however well it ranks, a
// superseded one takes no candidate's place, and another tenant's newer
// matches take none either.
func TestRecallCandidatesNewest(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	p := open(t, db, sqlitememory.Config{RecallCandidates: 3})
	texts := candidateItems(t, p, "t")
	// Another tenant's items, newer, with the same words.
	for i := range 5 {
		if _, err := p.Remember(bg, "other", memory.Item{Text: fmt.Sprintf("dentist dentist visit %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	newest3 := texts[6:9] // texts[9] is superseded
	const query = "Is my dentist Kim free on Thursday?"
	for _, tc := range []struct {
		b    memory.Budget
		want []string
	}{
		{memory.Budget{}, newest3},
		{memory.Budget{MaxTokens: 1 << 20}, newest3},
		{memory.Budget{MaxEntries: 2}, nil}, // 2 of the 3 newest
		{memory.Budget{MaxEntries: 9}, texts[:9]},
		{memory.Budget{MaxEntries: 50}, texts[:9]},
	} {
		got, err := p.Recall(bg, "t", query, tc.b)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.want == nil:
			if len(got) != tc.b.MaxEntries || !subset(itemTexts(got), newest3) {
				t.Errorf("Recall(%+v) = %q, want %d of %q", tc.b, itemTexts(got), tc.b.MaxEntries, newest3)
			}
		case !sameSet(itemTexts(got), tc.want):
			t.Errorf("Recall(%+v) = %q, want %q", tc.b, itemTexts(got), tc.want)
		}
		if tc.b.MaxEntries >= 9 && (len(got) == 0 || got[0].Text != texts[0]) {
			t.Errorf("Recall(%+v) = %q, want the best match %q first", tc.b, itemTexts(got), texts[0])
		}
	}

	// The default ranks every match of a tenant within the default
	// MaxItemsPerTenant.
	all := open(t, db, sqlitememory.Config{TablePrefix: "all_"})
	texts = candidateItems(t, all, "t")
	got, err := all.Recall(bg, "t", query, memory.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if !sameSet(itemTexts(got), texts[:9]) || got[0].Text != texts[0] {
		t.Errorf("Recall with the default candidates = %q, want %q, the best first", itemTexts(got), texts[:9])
	}
}

// TestRecallCandidatesHybrid: with an Embedder, the lexical candidates are
// the RecallCandidates newest matches too; an older match comes back only
// when it is among the memory.RecentCandidates newest items.
func TestRecallCandidatesHybrid(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	p := open(t, db, sqlitememory.Config{RecallCandidates: 3, Embedder: llmtest.NewEmbedder(8)})
	texts := candidateItems(t, p, "t")
	const query = "Is my dentist Kim free on Thursday?"
	// Push the matches out of the newest items.
	filler := make([]memory.Item, memory.RecentCandidates)
	for i := range filler {
		filler[i] = memory.Item{Text: fmt.Sprintf("plumber note %d", i), CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	if _, err := p.Remember(bg, "t", filler...); err != nil {
		t.Fatal(err)
	}
	got, err := p.Recall(bg, "t", query, memory.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	var matches []string
	for _, s := range itemTexts(got) {
		if strings.Contains(s, "dentist") {
			matches = append(matches, s)
		}
	}
	if !sameSet(matches, texts[6:9]) {
		t.Errorf("hybrid Recall recalled the matches %q, want the 3 newest %q", matches, texts[6:9])
	}
}

func TestNewRejectsRecallCandidates(t *testing.T) {
	db, err := sql.Open("sqlite", "file:never-opened.db") // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := sqlitememory.New(db, sqlitememory.Config{RecallCandidates: -1}); err == nil || !errors.Is(err, memory.ErrInvalid) || !strings.Contains(err.Error(), "RecallCandidates") {
		t.Errorf("New(RecallCandidates -1) = %v; want memory.ErrInvalid naming RecallCandidates", err)
	}
	if _, err := sqlitememory.New(db, sqlitememory.Config{RecallCandidates: 1}); err != nil {
		t.Errorf("New(RecallCandidates 1): %v", err)
	}
}

func itemTexts(items []memory.Item) []string {
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

// subset reports whether every string of a is in b.
func subset(a, b []string) bool {
	for _, s := range a {
		if !slices.Contains(b, s) {
			return false
		}
	}
	return true
}
