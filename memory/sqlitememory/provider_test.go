package sqlitememory_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

func TestNewRejects(t *testing.T) {
	db, err := sql.Open("sqlite", "file:never-opened.db") // connects lazily
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		name string
		db   *sql.DB
		cfg  sqlitememory.Config
		want string
	}{
		{"nil db", nil, sqlitememory.Config{}, "needs a *sql.DB"},
		{"NUL", db, sqlitememory.Config{TablePrefix: "a\x00b"}, "NUL"},
		{"not UTF-8", db, sqlitememory.Config{TablePrefix: "\xff"}, "UTF-8"},
		{"reserved", db, sqlitememory.Config{TablePrefix: "sqlite_"}, "sqlite_"},
		{"negative MaxMessages", db, sqlitememory.Config{MaxMessages: -1}, "MaxMessages"},
		{"negative MaxItemsPerTenant", db, sqlitememory.Config{MaxItemsPerTenant: -1}, "MaxItemsPerTenant"},
	} {
		p, err := sqlitememory.New(tc.db, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("%s: New = %v, %v; want an error wrapping memory.ErrInvalid with %q", tc.name, p, err, tc.want)
		}
	}
	if _, err := sqlitememory.New(db, sqlitememory.Config{TablePrefix: `my "mem" `}); err != nil {
		t.Errorf("a prefix that needs quoting: %v", err)
	}
}

func TestNotMigrated(t *testing.T) {
	p, err := sqlitememory.New(sqlitetest.Open(t, 1), sqlitememory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append(bg, "t", "c", llm.UserMessage("hello")); err == nil || !strings.Contains(err.Error(), "run Migrate first") {
		t.Errorf("Append before Migrate: %v", err)
	}
	if _, err := p.Recall(bg, "t", "hello", memory.Budget{}); err == nil || !strings.Contains(err.Error(), "run Migrate first") {
		t.Errorf("Recall before Migrate: %v", err)
	}
}

// TestOtherPrefix: providers with other prefixes on one file keep apart.
func TestOtherPrefix(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	a := open(t, db, sqlitememory.Config{TablePrefix: `a "x" `})
	b := open(t, db, sqlitememory.Config{})
	if _, err := a.Remember(bg, "t", memory.Item{Text: "dentist"}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Recall(bg, "t", "dentist", memory.Budget{}); err != nil || len(got) != 0 {
		t.Errorf("another prefix recalls %d items, %v", len(got), err)
	}
	if got, err := a.Recall(bg, "t", "dentist", memory.Budget{}); err != nil || len(got) != 1 {
		t.Errorf("own prefix recalls %d items, %v", len(got), err)
	}
}

// TestMaxMessages: past MaxMessages the oldest messages go, cut so that
// the history never starts with a tool result.
func TestMaxMessages(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	p := open(t, db, sqlitememory.Config{MaxMessages: 5})
	call := llm.ToolCall{ID: "x", Name: "lookup", Arguments: []byte(`{}`)}
	tool := []llm.Message{llm.UserMessage("q1"), llm.AssistantMessage("", call), llm.ToolResultMessage(call, "r", false), llm.AssistantMessage("a1")}
	for _, turn := range [][]llm.Message{tool, {llm.UserMessage("q2"), llm.AssistantMessage("a2")}} {
		if err := p.Append(bg, "t", "c", turn...); err != nil {
			t.Fatal(err)
		}
	}
	h, err := p.History(bg, "t", "c", 0)
	if err != nil || len(h) != 5 || len(h[0].ToolCalls) != 1 {
		t.Fatalf("History = %v, %v; want 5 messages from the call", h, err)
	}
	if err := p.Append(bg, "t", "c", llm.UserMessage("q3"), llm.AssistantMessage("a3")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM memory_history`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	h, err = p.History(bg, "t", "c", 0)
	if err != nil || len(h) != 5 || h[0].Content != "a1" || n != 5 {
		t.Fatalf("History = %d messages from %q (%d rows), %v; want the 5 from \"a1\"", len(h), h[0].Content, n, err)
	}
}

// TestItemCap: past MaxItemsPerTenant the tenant's oldest items go, and
// their words leave the index with them.
func TestItemCap(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	p := open(t, db, sqlitememory.Config{MaxItemsPerTenant: 3})
	for i := range 5 {
		if _, err := p.Remember(bg, "t", memory.Item{Text: fmt.Sprintf("note %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.Remember(bg, "u", memory.Item{Text: "note of u"}); err != nil {
		t.Fatal(err)
	}
	got, err := p.Recall(bg, "t", "note", memory.Budget{})
	if err != nil || len(got) != 3 || got[0].Text != "note 4" || got[2].Text != "note 2" {
		t.Fatalf("Recall after the cap = %+v, %v; want notes 4, 3, 2", got, err)
	}
	var indexed int
	if err := db.QueryRow(`SELECT count(*) FROM memory_items_fts`).Scan(&indexed); err != nil || indexed != 4 {
		t.Errorf("%d items in the full-text index, %v; want 4 (3 of t, 1 of u)", indexed, err)
	}
	_, err = p.Remember(bg, "t", memory.Item{Text: "a"}, memory.Item{Text: "b"}, memory.Item{Text: "c"}, memory.Item{Text: "d"})
	if !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("Remember of more items than the cap: %v, want memory.ErrInvalid", err)
	}
}

// TestTwoProcesses: two *sql.DB on one file, as two replicas would open
// it, append turns to one conversation at once: every turn is there,
// whole, none interleaved with another.
func TestTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	a := open(t, sqlitetest.OpenPath(t, path, 3), sqlitememory.Config{})
	b := open(t, sqlitetest.OpenPath(t, path, 3), sqlitememory.Config{})
	const writers, turns = 4, 10
	var wg sync.WaitGroup
	for w := range writers {
		p := a
		if w%2 == 1 {
			p = b
		}
		wg.Go(func() {
			for i := range turns {
				id := fmt.Sprintf("w%d-%d", w, i)
				c := llm.ToolCall{ID: id, Name: "lookup", Arguments: []byte(`{}`)}
				turn := []llm.Message{llm.UserMessage(id), llm.AssistantMessage("", c), llm.ToolResultMessage(c, id, false), llm.AssistantMessage(id)}
				if err := p.Append(bg, "t", "c", turn...); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	h, err := b.History(bg, "t", "c", 0)
	if err != nil || len(h) != writers*turns*4 {
		t.Fatalf("History = %d messages, %v; want %d", len(h), err, writers*turns*4)
	}
	for i := 0; i < len(h); i += 4 {
		id := h[i].Content
		if h[i+1].ToolCalls[0].ID != id || h[i+2].ToolCallID != id || h[i+3].Content != id {
			t.Fatalf("turn at %d is interleaved: %q %q %q %q", i, id, h[i+1].ToolCalls[0].ID, h[i+2].ToolCallID, h[i+3].Content)
		}
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Error(err)
	}
}
