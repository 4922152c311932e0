package memorytest

import (
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/memory"
)

func rememberFacts(t *testing.T, p memory.Provider, tenant string) []string {
	t.Helper()
	items := make([]memory.Item, len(facts))
	for i, f := range facts {
		items[i] = memory.Item{Text: f, Kind: "fact"}
	}
	return remember(t, p, tenant, items...)
}

// wantRecall checks that query recalls exactly the facts with the given
// indexes, in any order, with positive scores, most relevant first.
func wantRecall(t *testing.T, p memory.Provider, query string, want ...int) []memory.Item {
	t.Helper()
	got := recall(t, p, "alice", query, memory.Budget{})
	var wantTexts []string
	for _, i := range want {
		wantTexts = append(wantTexts, facts[i])
	}
	gotTexts := texts(got)
	if !sameSet(gotTexts, wantTexts) {
		t.Errorf("Recall(%q) = %q, want %q", query, gotTexts, wantTexts)
	}
	checkScores(t, query, got)
	return got
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func checkScores(t *testing.T, query string, got []memory.Item) {
	t.Helper()
	for i, it := range got {
		if it.Score <= 0 {
			t.Errorf("Recall(%q): item %q has Score %v, want > 0", query, it.Text, it.Score)
		}
		if i > 0 && it.Score > got[i-1].Score {
			t.Errorf("Recall(%q): scores not in descending order: %v then %v", query, got[i-1].Score, it.Score)
		}
	}
}

func testRecallRelevance(t *testing.T, p memory.Provider) {
	rememberFacts(t, p, "alice")
	// The user's message as typed: "what's", "my", "again" are stop
	// words, "name" is in no item, "dentist's" is "dentist".
	wantRecall(t, p, "What's my dentist's name again?", 0, 3)
	// The item holding both words comes first.
	got := wantRecall(t, p, "dentist appointment", 0, 3)
	if len(got) == 2 && got[0].Text != facts[3] {
		t.Errorf("Recall(dentist appointment): %q first, want the item holding both words", got[0].Text)
	}
	// Any word matches; the item matching two of them comes first.
	got = wantRecall(t, p, "Who is my dentist on Main Street? Or the zebra?", 0, 3)
	if len(got) == 2 && got[0].Text != facts[0] {
		t.Errorf("Recall(dentist on Main Street): %q first, want the item holding all three words", got[0].Text)
	}
	wantRecall(t, p, "zebra giraffe")
	got = wantRecall(t, p, "user dentist", 0, 1, 2, 3, 4)
	if len(got) == 5 && got[0].Text != facts[0] {
		t.Errorf("Recall(user dentist): %q first, want the one item holding both words", got[0].Text)
	}
}

func testRecallNormalises(t *testing.T, p memory.Provider) {
	rememberFacts(t, p, "alice")
	wantRecall(t, p, "dentists", 0, 3)
	wantRecall(t, p, "DENTIST", 0, 3)
	wantRecall(t, p, "flight", 1)
	wantRecall(t, p, "I preferred a seat", 1)
	wantRecall(t, p, "birthdays", 2)
	wantRecall(t, p, "runs", 4)
	wantRecall(t, p, "appointments reminders", 3)
	wantRecall(t, p, "(dentist)!", 0, 3)
}

func testRecallStopWords(t *testing.T, p memory.Provider) {
	rememberFacts(t, p, "alice")
	remember(t, p, "alice", memory.Item{Text: "what is it? the and of"}) // an item of stop words only
	for _, q := range []string{"", "   ", "What is it?", "?!... ---", "the and of", "Is it what it is?"} {
		got, err := p.Recall(bg, "alice", q, memory.Budget{})
		if err != nil || len(got) != 0 {
			t.Errorf("Recall(%q) = %q, %v; want nothing, nil", q, texts(got), err)
		}
	}
}

func testRecallBudget(t *testing.T, p memory.Provider) {
	big := "budget " + strings.Repeat("budget figures and other long numbers ", 10) // 387 bytes: 129 tokens
	small := []string{"budget alpha", "budget beta", "budget gamma"}                // 4 tokens each, equally relevant
	remember(t, p, "alice", memory.Item{Text: big})
	for _, s := range small {
		remember(t, p, "alice", memory.Item{Text: s})
	}
	all := recall(t, p, "alice", "budget", memory.Budget{})
	if len(all) != 4 {
		t.Fatalf("Recall(budget) without a budget = %q, want all 4 items", texts(all))
	}
	checkScores(t, "budget", all)
	// Equally relevant items come newest first.
	var order []string
	for _, it := range all {
		if it.Text != big {
			order = append(order, it.Text)
		}
	}
	if want := []string{"budget gamma", "budget beta", "budget alpha"}; !slices.Equal(order, want) {
		t.Errorf("equally relevant items in the order %q, want the newest first: %q", order, want)
	}

	for entries := 1; entries <= 5; entries++ {
		got := recall(t, p, "alice", "budget", memory.Budget{MaxEntries: entries})
		if len(got) != min(entries, 4) {
			t.Errorf("MaxEntries %d: got %d items", entries, len(got))
			continue
		}
		if !slices.Equal(texts(got), texts(all[:len(got)])) {
			t.Errorf("MaxEntries %d: got %q, want the first of %q", entries, texts(got), texts(all))
		}
	}

	// The big item is larger than the whole budget: skipped, not
	// truncated; the small ones are taken whatever their rank.
	got := recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 100})
	if !sameSet(texts(got), small) {
		t.Errorf("MaxTokens 100: got %q, want the three small items", texts(got))
	}
	got = recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 9})
	if len(got) != 2 || slices.Contains(texts(got), big) {
		t.Errorf("MaxTokens 9: got %q, want two small items (4 tokens each)", texts(got))
	}
	got = recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 3})
	if len(got) != 0 {
		t.Errorf("MaxTokens 3: got %q, want nothing (every item is larger)", texts(got))
	}
	got = recall(t, p, "alice", "budget", memory.Budget{MaxTokens: 1000, MaxEntries: 2})
	if !slices.Equal(texts(got), texts(all[:2])) {
		t.Errorf("MaxTokens 1000, MaxEntries 2: got %q, want %q", texts(got), texts(all[:2]))
	}
	for _, b := range []memory.Budget{{MaxTokens: 9}, {MaxTokens: 140}, {MaxTokens: 137, MaxEntries: 3}} {
		total := 0
		for _, it := range recall(t, p, "alice", "budget", b) {
			if it.Tokens != memory.EstimateTokens(it.Text) {
				t.Errorf("item %q has Tokens %d, want %d", it.Text, it.Tokens, memory.EstimateTokens(it.Text))
			}
			total += it.Tokens
		}
		if total > b.MaxTokens {
			t.Errorf("budget %+v: recalled %d tokens", b, total)
		}
	}
}

func testSupersedes(t *testing.T, p memory.Provider) {
	old := remember(t, p, "alice", memory.Item{Text: "The user's dentist is Dr. Kim.", Source: memory.Provenance{ConversationID: "c1"}})
	remember(t, p, "alice", memory.Item{Text: "The user's barber is Sam."})
	newer := remember(t, p, "alice", memory.Item{Text: "The user's dentist is now Dr. Lee.", Supersedes: old[0], Source: memory.Provenance{ConversationID: "c2"}})

	got := recall(t, p, "alice", "dentist", memory.Budget{})
	if len(got) != 1 || got[0].ID != newer[0] || got[0].Supersedes != old[0] {
		t.Errorf("Recall(dentist) = %+v, want only the superseding item", got)
	}
	if got := recall(t, p, "alice", "Kim", memory.Budget{}); len(got) != 0 {
		t.Errorf("Recall(Kim) = %q: a superseded item was recalled", texts(got))
	}
	if got := texts(recall(t, p, "alice", "barber", memory.Budget{})); !slices.Equal(got, []string{"The user's barber is Sam."}) {
		t.Errorf("Recall(barber) = %q", got)
	}
	// Supersedes naming no item hides nothing and is kept.
	ghost := remember(t, p, "alice", memory.Item{Text: "The user's cat is Tom.", Supersedes: "no-such-item"})
	if got := recall(t, p, "alice", "cat", memory.Budget{}); len(got) != 1 || got[0].ID != ghost[0] {
		t.Errorf("Recall(cat) = %q, want the item superseding nothing", texts(got))
	}
	// Once the superseding item is gone, the old one is recalled again.
	if n := forget(t, p, "alice", memory.Provenance{ConversationID: "c2"}); n != 1 {
		t.Errorf("Forget(c2) removed %d, want 1", n)
	}
	got = recall(t, p, "alice", "dentist", memory.Budget{})
	if len(got) != 1 || got[0].ID != old[0] {
		t.Errorf("Recall(dentist) after the superseding item was forgotten = %q, want the old item", texts(got))
	}
}
