package pgmemory_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/memorytest"
	"github.com/valetkit/valet/memory/pgmemory"
)

func TestHybrid(t *testing.T) {
	db := testDB(t)
	memorytest.RunHybrid(t, func(t *testing.T, e llm.Embedder) memory.Provider {
		return open(t, db, pgmemory.Config{Embedder: e})
	})
}

// TestHybridStoresVectors: the vectors Remember gets are in the
// embedding_f32 column (float32s, little-endian), NULL when the embedder
// failed; one Embed call per Remember and per Recall.
func TestHybridStoresVectors(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	emb := llmtest.NewEmbedder(8)
	p := open(t, db, pgmemory.Config{Schema: schema, Embedder: emb})
	ids, err := p.Remember(bg, "t", memory.Item{Text: "alpha beta"}, memory.Item{Text: "gamma"})
	if err != nil {
		t.Fatal(err)
	}
	emb.Fail(&llm.Error{Kind: llm.KindUnavailable})
	failed, err := p.Remember(bg, "t", memory.Item{Text: "delta"})
	if err != nil {
		t.Fatalf("Remember while the embedder fails: %v", err)
	}
	emb.Fail(nil)
	if n := emb.Calls(); n != 2 {
		t.Errorf("%d Embed calls for 2 Remembers", n)
	}
	want, _ := emb.Embed(bg, []string{"alpha beta", "gamma"})
	for i, id := range append(ids, failed...) {
		var raw []byte
		var array []float32
		if err := db.QueryRow(bg, `SELECT embedding_f32, embedding FROM `+pgx.Identifier{schema, "memory_items"}.Sanitize()+` WHERE id = $1::bigint`, id).Scan(&raw, &array); err != nil {
			t.Fatal(err)
		}
		if array != nil {
			t.Errorf("item %s: the real[] column holds %v, want NULL (it is for items of earlier releases)", id, array)
		}
		var got []float32
		for b := raw; len(b) >= 4; b = b[4:] {
			got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(b)))
		}
		if raw != nil && len(raw) != 4*len(got) {
			t.Errorf("item %s: embedding_f32 holds %d bytes, not whole float32s", id, len(raw))
		}
		switch {
		case i < len(want) && !slices.Equal(got, want[i]):
			t.Errorf("item %s: embedding %v, want %v", id, got, want[i])
		case i == len(want) && got != nil:
			t.Errorf("item %s, remembered while the embedder failed: embedding %v, want NULL", id, got)
		}
	}
	before := emb.Calls()
	if _, err := p.Recall(bg, "t", "alpha", memory.Budget{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Recall(bg, "t", "?!", memory.Budget{}); err != nil {
		t.Fatal(err)
	}
	if n := emb.Calls() - before; n != 1 {
		t.Errorf("%d Embed calls for a Recall and a Recall without words, want 1", n)
	}
}

// TestMigrateAddsEmbedding: tables migrated before vectors existed gain
// the column and the index; their items are recalled lexically, new ones
// by similarity too.
func TestMigrateAddsEmbedding(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	items := pgx.Identifier{schema, "memory_items"}.Sanitize()
	old := open(t, db, pgmemory.Config{Schema: schema})
	// Back to the tables of the first release.
	for _, q := range []string{
		`ALTER TABLE ` + items + ` DROP COLUMN embedding`,
		`ALTER TABLE ` + items + ` DROP COLUMN embedding_f32`,
		`DROP INDEX ` + pgx.Identifier{schema, "memory_items_recent_idx"}.Sanitize(),
		`INSERT INTO ` + items + ` (tenant_id, text, tokens) VALUES ('t', 'The user''s dentist is Dr. Kim.', 10)`,
	} {
		if _, err := db.Exec(bg, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := old.Remember(bg, "t", memory.Item{Text: "dentist"}); err == nil {
		t.Fatal("Remember into the first release's table did not fail: the column is still there")
	}
	p := open(t, db, pgmemory.Config{Schema: schema, Embedder: llmtest.NewEmbedder(0).Concept("dentist", "teeth")})
	moved := "The user's dentist moved to Porto."
	if _, err := p.Remember(bg, "t", memory.Item{Text: moved}); err != nil {
		t.Fatalf("Remember after migrating again: %v", err)
	}
	var indexes int
	if err := db.QueryRow(bg, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND indexname = 'memory_items_recent_idx'`, schema).Scan(&indexes); err != nil || indexes != 1 {
		t.Errorf("recent index: %d, %v", indexes, err)
	}
	if got := recallTexts(t, p, "teeth"); !slices.Equal(got, []string{moved}) {
		t.Errorf("Recall(teeth) = %q, want only the item with a vector", got)
	}
	if got := recallTexts(t, p, "dentist"); len(got) != 2 {
		t.Errorf("Recall(dentist) = %q, want both items", got)
	}
}

func recallTexts(t *testing.T, p memory.Provider, query string) []string {
	t.Helper()
	items, err := p.Recall(bg, "t", query, memory.Budget{})
	if err != nil {
		t.Fatalf("Recall(%q): %v", query, err)
	}
	var out []string
	for _, it := range items {
		out = append(out, it.Text)
	}
	return out
}

// TestHybridCandidates: vector similarity reaches the RecentCandidates
// newest items (by CreatedAt, not by the order they were written) and the
// LexicalCandidates best lexical matches, or MaxEntries of them when that
// is more.
func TestHybridCandidates(t *testing.T) {
	db := testDB(t)
	p := open(t, db, pgmemory.Config{Embedder: llmtest.NewEmbedder(0).Concept("orthodontist", "teeth")})
	const n = 150
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var batch []memory.Item
	for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(n) {
		batch = append(batch, memory.Item{Text: "dentist orthodontist", CreatedAt: base.Add(time.Duration(i) * time.Minute)})
	}
	if _, err := p.Remember(bg, "t", batch...); err != nil {
		t.Fatal(err)
	}
	got, err := p.Recall(bg, "t", "teeth", memory.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != memory.RecentCandidates {
		t.Fatalf("a vector-only query recalls %d items, want the %d newest", len(got), memory.RecentCandidates)
	}
	oldest := base.Add((n - memory.RecentCandidates) * time.Minute)
	for i, it := range got {
		if it.CreatedAt.Before(oldest) {
			t.Fatalf("item %d was created at %v, before the %d newest", i, it.CreatedAt, memory.RecentCandidates)
		}
		if i > 0 && !it.CreatedAt.Before(got[i-1].CreatedAt) {
			t.Fatalf("equally similar items not newest first: %v then %v", got[i-1].CreatedAt, it.CreatedAt)
		}
	}
	for _, tc := range []struct {
		b    memory.Budget
		want int
	}{
		{memory.Budget{}, memory.LexicalCandidates},
		{memory.Budget{MaxEntries: 120}, 120},
		{memory.Budget{MaxEntries: 1000}, n},
	} {
		got, err := p.Recall(bg, "t", "dentist", tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("Recall(dentist, %+v) = %d items, want %d", tc.b, len(got), tc.want)
		}
	}
}

// TestRecallTokenBudgetCandidates: lexical Recall ranks at most the
// RecallCandidates (1,000) newest matches, or MaxEntries when more, so a
// Recall returns at most that many, whatever the budget.
func TestRecallTokenBudgetCandidates(t *testing.T) {
	db := testDB(t)
	p := open(t, db, pgmemory.Config{MaxItemsPerTenant: 2000})
	batch := make([]memory.Item, 1100)
	for i := range batch {
		batch[i] = memory.Item{Text: fmt.Sprintf("note %d", i)}
	}
	if _, err := p.Remember(bg, "t", batch...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		b    memory.Budget
		want int
	}{
		{memory.Budget{}, pgmemory.DefaultRecallCandidates}, // the newest 1,000 matches are ranked
		{memory.Budget{MaxTokens: 1 << 20}, pgmemory.DefaultRecallCandidates},
		{memory.Budget{MaxTokens: 1 << 20, MaxEntries: 1050}, 1050},
		{memory.Budget{MaxTokens: 9}, 3}, // "note 1099" is 3 tokens
	} {
		got, err := p.Recall(bg, "t", "note", tc.b)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tc.want {
			t.Errorf("Recall(note, %+v) = %d items, want %d", tc.b, len(got), tc.want)
		}
	}
}

// A history table of an earlier version (message jsonb, no summary
// column) is brought up to date by Migrate, its messages kept: then a
// turn with a NUL byte and a summary can be saved.
func TestMigrateUpgradesHistory(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	history := pgx.Identifier{schema, "memory_history"}.Sanitize()
	open(t, db, pgmemory.Config{Schema: schema})
	for _, q := range []string{
		`ALTER TABLE ` + history + ` DROP COLUMN summary`,
		`ALTER TABLE ` + history + ` ALTER COLUMN message TYPE jsonb`,
		`INSERT INTO ` + history + ` (tenant_id, conversation_id, role, message) VALUES ('t', 'c', 'user', '{"role":"user","content":"old question"}')`,
	} {
		if _, err := db.Exec(bg, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	p := open(t, db, pgmemory.Config{Schema: schema}) // migrates again
	turn := []llm.Message{
		{Role: llm.RoleSystem, Name: memory.SummaryName, Content: "summary of the old question"},
		llm.UserMessage("a NUL: \x00 here"),
		llm.AssistantMessage("ok"),
	}
	if err := p.Append(bg, "t", "c", turn...); err != nil {
		t.Fatalf("Append after the upgrade: %v", err)
	}
	h, err := p.History(bg, "t", "c", 0)
	if err != nil || len(h) != 3 || h[1].Content != turn[1].Content {
		t.Fatalf("History = %+v, %v; want the summary on", h, err)
	}
	var typ string
	if err := db.QueryRow(bg, `SELECT data_type FROM information_schema.columns WHERE table_schema = $1 AND table_name = 'memory_history' AND column_name = 'message'`, schema).Scan(&typ); err != nil || typ != "json" {
		t.Fatalf("message column: %q, %v", typ, err)
	}
}
