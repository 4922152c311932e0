package pgmemory_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/goleak"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/memorytest"
	"github.com/valetkit/valet/memory/pgmemory"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var bg = context.Background()

// The test database and schemas come from internal/pgtest.
func testDB(t testing.TB) *pgxpool.Pool               { return pgtest.DB(t) }
func newSchema(t testing.TB, db *pgxpool.Pool) string { return pgtest.Schema(t, db) }

// open returns a migrated provider in a schema of the test's own.
func open(t testing.TB, db *pgxpool.Pool, opts pgmemory.Config) *pgmemory.Provider {
	t.Helper()
	if opts.Schema == "" {
		opts.Schema = newSchema(t, db)
	}
	p, err := pgmemory.New(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Migrate(bg); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	return p
}

func TestProvider(t *testing.T) {
	db := testDB(t)
	memorytest.Run(t, func(t *testing.T) memory.Provider {
		return open(t, db, pgmemory.Config{})
	})
}

func TestNewRejects(t *testing.T) {
	db, err := pgxpool.New(bg, "postgres://nobody@127.0.0.1:1/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tc := range []struct {
		name string
		db   *pgxpool.Pool
		opts pgmemory.Config
		want string
	}{
		{"nil pool", nil, pgmemory.Config{}, "needs a *pgxpool.Pool"},
		{"long prefix", db, pgmemory.Config{TablePrefix: strings.Repeat("p", 40)}, "longer than"},
		{"long schema", db, pgmemory.Config{Schema: strings.Repeat("s", 64)}, "longer than"},
		{"NUL", db, pgmemory.Config{TablePrefix: "a\x00b"}, "NUL"},
		{"schema not UTF-8", db, pgmemory.Config{Schema: "\xff"}, "UTF-8"},
		{"negative MaxMessages", db, pgmemory.Config{MaxMessages: -1}, "MaxMessages"},
		{"negative MaxItemsPerTenant", db, pgmemory.Config{MaxItemsPerTenant: -1}, "MaxItemsPerTenant"},
	} {
		// Refused with memory.ErrInvalid, as pgstore's refusals wrap
		// credentials.ErrInvalid and rivertrigger's trigger.ErrInvalid.
		p, err := pgmemory.New(tc.db, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, memory.ErrInvalid) {
			t.Errorf("%s: New = %v, %v; want an error wrapping memory.ErrInvalid with %q", tc.name, p, err, tc.want)
		}
	}
	if _, err := pgmemory.New(db, pgmemory.Config{Schema: `we"ird`, TablePrefix: "my mem "}); err != nil {
		t.Errorf("names that need quoting: %v", err)
	}
}

// TestMigrateConcurrent: processes starting together all migrate; none
// fails, and the tables work after.
func TestMigrateConcurrent(t *testing.T) {
	db := testDB(t)
	for round := range 5 {
		schema := newSchema(t, db)
		var wg sync.WaitGroup
		start := make(chan struct{})
		provs := make([]*pgmemory.Provider, 6)
		for i := range provs {
			p, err := pgmemory.New(db, pgmemory.Config{Schema: schema})
			if err != nil {
				t.Fatal(err)
			}
			provs[i] = p
			wg.Go(func() {
				<-start
				if err := p.Migrate(bg); err != nil {
					t.Errorf("round %d: Migrate %d: %v", round, i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if err := provs[0].Append(bg, "t", "c", llm.UserMessage("hello"), llm.AssistantMessage("hi")); err != nil {
			t.Fatalf("Append after concurrent Migrates: %v", err)
		}
		if _, err := provs[1].Remember(bg, "t", memory.Item{Text: fmt.Sprintf("round %d dentist", round)}); err != nil {
			t.Fatalf("Remember after concurrent Migrates: %v", err)
		}
		if err := provs[2].Migrate(bg); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
		if h, err := provs[3].History(bg, "t", "c", 0); err != nil || len(h) != 2 {
			t.Fatalf("History after migrating again = %d messages, %v", len(h), err)
		}
		if got, err := provs[4].Recall(bg, "t", "dentists", memory.Budget{}); err != nil || len(got) != 1 {
			t.Fatalf("Recall after migrating again = %d items, %v", len(got), err)
		}
	}
}

func TestNotMigrated(t *testing.T) {
	db := testDB(t)
	p, err := pgmemory.New(db, pgmemory.Config{Schema: newSchema(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Append(bg, "t", "c", llm.UserMessage("hello"))
	if err == nil || !strings.Contains(err.Error(), "run Migrate first") {
		t.Errorf("Append before Migrate: %v", err)
	}
	if _, err := p.Recall(bg, "t", "hello", memory.Budget{}); err == nil || !strings.Contains(err.Error(), "run Migrate first") {
		t.Errorf("Recall before Migrate: %v", err)
	}
}

// TestMaxMessages: past MaxMessages the oldest messages go, cut so that
// the history never starts with a tool result.
func TestMaxMessages(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	p := open(t, db, pgmemory.Config{Schema: schema, MaxMessages: 5})
	call := llm.ToolCall{ID: "x", Name: "lookup", Arguments: []byte(`{}`)}
	tool := []llm.Message{llm.UserMessage("q1"), llm.AssistantMessage("", call), llm.ToolResultMessage(call, "r", false), llm.AssistantMessage("a1")}
	for _, turn := range [][]llm.Message{tool, {llm.UserMessage("q2"), llm.AssistantMessage("a2")}} {
		if err := p.Append(bg, "t", "c", turn...); err != nil {
			t.Fatal(err)
		}
	}
	// 6 messages, 5 kept: from the call on; then 3 of the 4 in the
	// table start with the result, which goes too.
	h, err := p.History(bg, "t", "c", 0)
	if err != nil || len(h) != 5 || len(h[0].ToolCalls) != 1 {
		t.Fatalf("History = %v, %v; want 5 messages from the call", h, err)
	}
	if err := p.Append(bg, "t", "c", llm.UserMessage("q3"), llm.AssistantMessage("a3")); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(bg, `SELECT count(*) FROM `+pgx.Identifier{schema, "memory_history"}.Sanitize()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	h, err = p.History(bg, "t", "c", 0)
	if err != nil || len(h) != 5 || h[0].Content != "a1" || n != 5 {
		t.Fatalf("History = %d messages from %q (%d rows), %v; want the 5 from \"a1\"", len(h), h[0].Content, n, err)
	}
}

// TestItemCap: past MaxItemsPerTenant the tenant's oldest items go.
func TestItemCap(t *testing.T) {
	db := testDB(t)
	p := open(t, db, pgmemory.Config{MaxItemsPerTenant: 3})
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
	if got, err := p.Recall(bg, "u", "note", memory.Budget{}); err != nil || len(got) != 1 {
		t.Fatalf("another tenant's items: %+v, %v", got, err)
	}
	_, err = p.Remember(bg, "t", memory.Item{Text: "a"}, memory.Item{Text: "b"}, memory.Item{Text: "c"}, memory.Item{Text: "d"})
	if !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("Remember of more items than the cap: %v, want memory.ErrInvalid", err)
	}
}
