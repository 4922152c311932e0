package pgmemory_test

import (
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// TestMigrateAddsOrigin: an items table of a release before Item.Origin
// gains the column when processes migrate at once; a memory_update
// route's task results (a task id, kind task_result) read as the
// trigger's, every other old item as the host's, and new items keep the
// origin they are given. Migrating again changes nothing.
func TestMigrateAddsOrigin(t *testing.T) {
	db := testDB(t)
	schema := newSchema(t, db)
	items := pgx.Identifier{schema, "memory_items"}.Sanitize()
	open(t, db, pgmemory.Config{Schema: schema})
	for _, q := range []string{
		`ALTER TABLE ` + items + ` DROP COLUMN origin`,
		`INSERT INTO ` + items + ` (tenant_id, text, tokens, task_id, kind) VALUES ('t', 'The bank of the mail is EvilBank.', 10, 'mail', 'task_result')`,
		`INSERT INTO ` + items + ` (tenant_id, text, tokens, conversation_id, kind) VALUES ('t', 'The user''s bank is Acme Bank.', 10, 'c1', 'fact')`,
	} {
		if _, err := db.Exec(bg, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			p, err := pgmemory.New(db, pgmemory.Config{Schema: schema})
			if err == nil {
				err = p.Migrate(bg)
			}
			if err != nil {
				t.Errorf("Migrate: %v", err)
			}
		})
	}
	wg.Wait()
	p := open(t, db, pgmemory.Config{Schema: schema}) // and once more
	if _, err := p.Remember(bg, "t", memory.Item{Text: "The user's old bank was Beta Bank.", Kind: "task_result", Source: memory.Provenance{TaskID: "x"}, Origin: memory.OriginUser}); err != nil {
		t.Fatal(err)
	}
	if err := p.Migrate(bg); err != nil {
		t.Fatal(err)
	}
	got, err := p.Recall(bg, "t", "bank", memory.Budget{})
	if err != nil || len(got) != 3 {
		t.Fatalf("Recall after the upgrade = %+v, %v", got, err)
	}
	want := map[string]memory.Origin{
		"The bank of the mail is EvilBank.":  memory.OriginTrigger,
		"The user's bank is Acme Bank.":      memory.OriginHost,
		"The user's old bank was Beta Bank.": memory.OriginUser,
	}
	for _, it := range got {
		if it.Origin != want[it.Text] {
			t.Errorf("%q has Origin %q, want %q", it.Text, it.Origin, want[it.Text])
		}
	}
}
