package memorytest

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

// words returns at least n bytes of distinct words ("w0 w1 w2 …"), each
// its own lexeme, so that an index holds one entry per word.
func words(n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("w")
		b.WriteString(strconv.FormatInt(int64(i), 36))
	}
	return b.String()
}

// testItemLimit: an item of MaxItemBytes is stored and recalled; a longer
// one (2 MB of distinct words among them, more than a PostgreSQL tsvector
// holds) is memory.ErrInvalid, and nothing of the call is stored.
func testItemLimit(t *testing.T, p memory.Provider) {
	head := "dentist "
	full := head + words(memory.MaxItemBytes)[:memory.MaxItemBytes-len(head)]
	full = strings.TrimRight(full, " ") + "x"
	if len(full) != memory.MaxItemBytes {
		t.Fatalf("test item is %d bytes", len(full))
	}
	ids := remember(t, p, "alice", memory.Item{Text: full})
	got := recall(t, p, "alice", "dentist", memory.Budget{})
	if len(got) != 1 || got[0].ID != ids[0] || got[0].Text != full {
		t.Fatalf("an item of MaxItemBytes (%d) was not recalled whole: %d items", memory.MaxItemBytes, len(got))
	}
	for _, tc := range []struct {
		name string
		text string
	}{
		{"one byte over MaxItemBytes", "surgeon " + full[len(head):] + "y"},
		{"2 MB of distinct words", "surgeon " + words(2<<20)},
	} {
		_, err := p.Remember(bg, "alice", memory.Item{Text: "The user's surgeon is Dr. Lee."}, memory.Item{Text: tc.text})
		if !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("Remember of an item of %s: got error %.300v, want memory.ErrInvalid", tc.name, err)
		}
	}
	if got := recall(t, p, "alice", "surgeon", memory.Budget{}); len(got) != 0 {
		t.Errorf("refused Remembers stored %d items", len(got))
	}
}

// testQueryLimit: a Recall query is read up to MaxQueryBytes, cut before
// the word that crosses the limit; a query of 1 MB of distinct words is
// answered, not an error.
func testQueryLimit(t *testing.T, p memory.Provider) {
	ids := remember(t, p, "alice",
		memory.Item{Text: "The user's dentist is Dr. Kim."},
		memory.Item{Text: "The user's car has a dent."},
		memory.Item{Text: "The user likes oranges."},
	)
	huge := "dentist " + words(1<<20) + " oranges"
	got, err := p.Recall(bg, "alice", huge, memory.Budget{}) // not recall: its failure would print the query
	if err != nil {
		t.Fatalf("Recall of a 1 MB query: %.300v", err)
	}
	if len(got) != 1 || got[0].ID != ids[0] {
		t.Errorf("Recall of a 1 MB query starting with dentist = %q, want only the dentist (the rest is past MaxQueryBytes)", texts(got))
	}
	// "dentist" crosses the limit: its start ("dent") is not read as a
	// word of its own.
	filler := words(memory.MaxQueryBytes)
	filler = filler[:strings.LastIndexByte(filler[:memory.MaxQueryBytes-6], ' ')]
	filler += strings.Repeat("z", memory.MaxQueryBytes-4-len(filler)-1) + " "
	q := filler + "dentist and more"
	if i := strings.Index(q, "dentist"); i >= memory.MaxQueryBytes || i+len("dentist") <= memory.MaxQueryBytes {
		t.Fatalf("test query: dentist at %d does not cross %d", i, memory.MaxQueryBytes)
	}
	if got, err := p.Recall(bg, "alice", q, memory.Budget{}); err != nil || len(got) != 0 {
		t.Errorf("Recall of a query whose word crosses MaxQueryBytes = %q, %.300v; want nothing (the cut word is dropped)", texts(got), err)
	}
	if got := memory.RecallQuery(q); got != strings.TrimRight(filler, " ") && got != filler {
		t.Errorf("RecallQuery cut at %d bytes, want %d", len(got), len(filler))
	}
}

// testLargeHistoryMessage: history is not indexed, so a message of 2 MB
// (of distinct words) is kept and read back whole.
func testLargeHistoryMessage(t *testing.T, p memory.Provider) {
	big := words(2 << 20)
	turn := []llm.Message{llm.UserMessage(big), llm.AssistantMessage("read it")}
	appendTurn(t, p, "alice", "conv", turn)
	wantMessages(t, "History after a 2 MB message", turn, history(t, p, "alice", "conv", 0))
}
