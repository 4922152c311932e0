package pgmemory_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// TestVectorsOfAnEarlierRelease: the release before kept vectors as
// real[] (the embedding column) and had no embedding_f32. Migrate adds
// the column (and changes nothing when run again); new items keep their
// vectors there, and hybrid recall reads both: the old item and the new
// one are recalled by similarity alone (the query shares no word with
// them), an unrelated one is not.
func TestVectorsOfAnEarlierRelease(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	items := pgx.Identifier{schema, "memory_items"}.Sanitize()
	emb := llmtest.NewEmbedder(0).Concept("dentist", "teeth")
	p := open(t, db, pgmemory.Config{Schema: schema, Embedder: emb})
	if _, err := db.Exec(bg, `ALTER TABLE `+items+` DROP COLUMN embedding_f32`); err != nil {
		t.Fatal(err)
	}
	old := "The user's dentist is Dr Kim."
	vecs, err := emb.Embed(bg, []string{old})
	if err != nil {
		t.Fatal(err)
	}
	// As the release before wrote an item.
	if _, err := db.Exec(bg, `INSERT INTO `+items+` (tenant_id, text, tokens, embedding) VALUES ('t', $1, 10, $2)`, old, vecs[0]); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.Migrate(bg); err != nil {
			t.Fatalf("Migrate over the release before's tables: %v", err)
		}
	}
	moved := "The user's dentist moved to Porto."
	if _, err := p.Remember(bg, "t", memory.Item{Text: moved}, memory.Item{Text: "Pizza on Fridays."}); err != nil {
		t.Fatal(err)
	}
	var f32, arrays int
	if err := db.QueryRow(bg, `SELECT count(embedding_f32), count(embedding) FROM `+items).Scan(&f32, &arrays); err != nil {
		t.Fatal(err)
	}
	if f32 != 2 || arrays != 1 {
		t.Errorf("vectors stored: %d in embedding_f32, %d in embedding; want the 2 new ones and the old one", f32, arrays)
	}
	if got := recallTexts(t, p, "teeth"); !sameSet(got, []string{old, moved}) {
		t.Errorf("Recall(teeth) = %q, want %q and %q, by similarity", got, old, moved)
	}
}
