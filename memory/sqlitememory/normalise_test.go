package sqlitememory_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

// sameRecallTexts are items whose words test the normalisation: case,
// possessives, plurals and other English stems, stop words, digits,
// accents (kept, not folded), scripts without case, hyphens, apostrophes
// and punctuation glued to words, FTS5's own syntax.
var sameRecallTexts = []string{
	"The user's dentist is Dr. Kim on Main Street.",
	"Dentists' appointments are on Tuesdays.",
	"The user prefers a window seat on flights.",
	"Running 10km every Sunday; ran a marathon in 2023.",
	"Café au lait, not a cafe latte — crème brûlée for dessert.",
	"Straße and STRASSE and strasse",
	"東京 trip in April; 東京タワー visit",
	"e-mail: ann@example.com, phone +351-21-123",
	"well-known self-service won't can't isn't",
	`NEAR("quoted" words) AND OR NOT * ^ : column:value`,
	"İstanbul and istanbul and ISTANBUL",
	"naïve résumé façade",
	"½ ² Ⅻ ٣ numbers",
	"what is it? the and of",
}

// sameRecallQueries are read as users type them.
var sameRecallQueries = []string{
	"What's my dentist's name again?", "dentist appointment", "DENTISTS", "flight seats", "runs", "running marathons",
	"cafe", "café", "creme brulee", "crème", "strasse", "Straße", "東京", "東京タワー", "mail example com", "well known",
	"self service", "won't", "NEAR", `"quoted"`, "column:value", "*", "AND OR NOT", "İstanbul", "istanbul", "naive", "naïve",
	"resume", "résumé", "½", "²", "Ⅻ", "٣", "numbers 2023", "10km", "the and of", "?!", "", "tuesday", "sunday's",
}

// TestSameRecallAsInMemory: every query recalls the same items, in the
// same order of relevance class, from this provider as from the memory
// package's in-memory one: the two read words alike.
func TestSameRecallAsInMemory(t *testing.T) {
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := open(t, sqlitetest.Open(t, 1), sqlitememory.Config{})
	for _, text := range sameRecallTexts {
		for _, prov := range []memory.Provider{mem, p} {
			if _, err := prov.Remember(bg, "t", memory.Item{Text: text}); err != nil {
				t.Fatalf("%T.Remember(%q): %v", prov, text, err)
			}
		}
	}
	// Random queries made of the items' own fragments, too.
	r := rand.New(rand.NewPCG(1, 2))
	queries := slices.Clone(sameRecallQueries)
	for range 200 {
		a, b := sameRecallTexts[r.IntN(len(sameRecallTexts))], sameRecallTexts[r.IntN(len(sameRecallTexts))]
		i, j := r.IntN(len(a)), r.IntN(len(b))
		queries = append(queries, a[i:min(len(a), i+1+r.IntN(12))]+" "+b[j:min(len(b), j+1+r.IntN(12))])
	}
	matched := 0
	for _, q := range queries {
		want, err := mem.Recall(bg, "t", q, memory.Budget{})
		if err != nil {
			t.Fatal(err)
		}
		if len(want) > 0 {
			matched++
		}
		got, err := p.Recall(bg, "t", q, memory.Budget{})
		if err != nil {
			t.Errorf("Recall(%q): %v", q, err)
			continue
		}
		if w, g := sorted(want), sorted(got); !slices.Equal(w, g) {
			t.Errorf("Recall(%q):\n got %q\nwant %q (in memory)", q, g, w)
		}
	}
	if matched < len(queries)/3 {
		t.Errorf("only %d of %d queries recall anything: the test compares too little", matched, len(queries))
	}
	t.Logf("%d of %d queries recall something", matched, len(queries))
}

func sorted(items []memory.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Text
	}
	slices.Sort(out)
	return out
}

// TestHostileQueries: queries that are FTS5 syntax, or would be if they
// reached FTS5 unquoted, are words like any other: no error, no match
// they do not earn.
func TestHostileQueries(t *testing.T) {
	p := open(t, sqlitetest.Open(t, 1), sqlitememory.Config{})
	if _, err := p.Remember(bg, "t", memory.Item{Text: "The user's dentist is Dr. Kim."}); err != nil {
		t.Fatal(err)
	}
	for i, q := range []string{
		`"`, `""`, `*`, `dentist*`, `NEAR(dentist kim, 1)`, `terms:dentist`, `{terms}: dentist`, `- dentist`, `^dentist`,
		`dentist" OR "kim`, `') OR 1=1 --`, "dentist\x00kim", "\xff\xfe dentist", `AND`, `NOT dentist`,
	} {
		got, err := p.Recall(bg, "t", q, memory.Budget{})
		if err != nil {
			t.Errorf("query %d %q: %v", i, q, err)
			continue
		}
		mem, _ := memory.NewInMemory(memory.Config{})
		mem.Remember(bg, "t", memory.Item{Text: "The user's dentist is Dr. Kim."})
		want, _ := mem.Recall(bg, "t", q, memory.Budget{})
		if len(got) != len(want) {
			t.Errorf("query %d %q: %d items, the in-memory provider %d", i, q, len(got), len(want))
		}
	}
	if got, err := p.Recall(bg, "t", fmt.Sprint("dentist", " OR kim"), memory.Budget{}); err != nil || len(got) != 1 {
		t.Errorf("Recall = %d, %v", len(got), err)
	}
}
