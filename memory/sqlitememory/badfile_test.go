package sqlitememory_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

func openDSN(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestNotADatabase: a file of other bytes is refused at Migrate, saying
// so, and is left as it was.
func TestNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	garbage := bytes.Repeat([]byte("this is not an SQLite file, just notes. "), 200)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	db := openDSN(t, sqlitetest.DSN(path, ""))
	p, err := sqlitememory.New(db, sqlitememory.Config{})
	if err != nil {
		t.Fatalf("New sends nothing to the file, so it cannot fail: %v", err)
	}
	err = p.Migrate(bg)
	if err == nil || !strings.Contains(err.Error(), "not an SQLite database") || !strings.HasPrefix(err.Error(), "sqlitememory: migrate") {
		t.Errorf("Migrate on a file that is not a database: %v", err)
	}
	if err := p.Append(bg, "t", "c", llm.UserMessage("hi")); err == nil {
		t.Error("Append on a file that is not a database succeeded")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, garbage) {
		t.Error("the file was changed")
	}
}

// TestReadOnly: a file opened read-only (mode=ro; root ignores file
// permissions, so a chmod would prove nothing) serves reads once
// migrated; every write fails saying the database is read-only, and a
// read-only file that was never migrated is refused at Migrate.
func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	rw := sqlitetest.OpenPath(t, path, 1)
	w := open(t, rw, sqlitememory.Config{})
	if err := w.Append(bg, "t", "c", llm.UserMessage("my dentist is Dr Kim"), llm.AssistantMessage("noted")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Remember(bg, "t", memory.Item{Text: "The user's dentist is Dr Kim."}); err != nil {
		t.Fatal(err)
	}

	ro := openDSN(t, sqlitetest.DSN(path, "mode=ro"))
	p := open(t, ro, sqlitememory.Config{}) // up to date: Migrate writes nothing
	if h, err := p.History(bg, "t", "c", 0); err != nil || len(h) != 2 {
		t.Errorf("History on a read-only file = %d messages, %v", len(h), err)
	}
	if got, err := p.Recall(bg, "t", "dentist", memory.Budget{}); err != nil || len(got) != 1 {
		t.Errorf("Recall on a read-only file = %d items, %v", len(got), err)
	}
	_, errRem := p.Remember(bg, "t", memory.Item{Text: "x"})
	_, errForget := p.Forget(bg, "t", memory.Provenance{ConversationID: "c"})
	for op, err := range map[string]error{
		"append":   p.Append(bg, "t", "c", llm.UserMessage("again")),
		"remember": errRem,
		"forget":   errForget,
	} {
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s on a read-only file: %v", op, err)
		}
	}
	if h, err := w.History(bg, "t", "c", 0); err != nil || len(h) != 2 {
		t.Errorf("after the refused writes: %d messages, %v", len(h), err)
	}

	// A read-only file that was never migrated.
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	sqlitetest.OpenPath(t, fresh, 1).Close() // an empty database
	p2, err := sqlitememory.New(openDSN(t, sqlitetest.DSN(fresh, "mode=ro")), sqlitememory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p2.Migrate(bg); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Migrate of a read-only file never migrated: %v", err)
	}
}

// TestSchemaTooNew: a file whose memory tables a newer valet wrote is
// refused at Migrate, naming both versions, and is not changed.
func TestSchemaTooNew(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	open(t, db, sqlitememory.Config{})
	if _, err := db.Exec(`UPDATE valet_schema_versions SET version = 7 WHERE component = 'memory/memory_'`); err != nil {
		t.Fatal(err)
	}
	p, err := sqlitememory.New(db, sqlitememory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Migrate(bg)
	if !errors.Is(err, sqlitememory.ErrSchemaTooNew) {
		t.Fatalf("Migrate of a newer file: %v, want ErrSchemaTooNew", err)
	}
	want := fmt.Sprintf("version 7, newer than version %d", sqlitememory.SchemaVersion)
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "memory/memory_") {
		t.Errorf("the error does not name the component and both versions (%q): %v", want, err)
	}
	var v int
	if err := db.QueryRow(`SELECT version FROM valet_schema_versions WHERE component = 'memory/memory_'`).Scan(&v); err != nil || v != 7 {
		t.Errorf("the recorded version is now %d, %v", v, err)
	}
	// Another prefix is another component: not refused.
	open(t, db, sqlitememory.Config{TablePrefix: "other_"})
}

// TestFailedWriteLeavesNothing: a write that fails part-way through its
// transaction — here a trigger raising an error at the second item or
// message — leaves nothing of the call behind: no item, no word in the
// full-text index, no message.
func TestFailedWriteLeavesNothing(t *testing.T) {
	db := sqlitetest.Open(t, 2)
	p := open(t, db, sqlitememory.Config{})
	for _, q := range []string{
		`CREATE TRIGGER fail_items BEFORE INSERT ON memory_items WHEN new.text LIKE '%boom%' BEGIN SELECT RAISE(ABORT, 'simulated failure'); END`,
		`CREATE TRIGGER fail_history BEFORE INSERT ON memory_history WHEN new.message LIKE '%boom%' BEGIN SELECT RAISE(ABORT, 'simulated failure'); END`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	_, err := p.Remember(bg, "t", memory.Item{Text: "The user's dentist is Dr Kim."}, memory.Item{Text: "boom dentist"})
	if err == nil || !strings.Contains(err.Error(), "simulated failure") {
		t.Fatalf("Remember through the failing trigger: %v", err)
	}
	if got, err := p.Recall(bg, "t", "dentist", memory.Budget{}); err != nil || len(got) != 0 {
		t.Errorf("after the failed Remember, Recall = %d items, %v", len(got), err)
	}
	var n int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM memory_items) + (SELECT count(*) FROM memory_items_fts)`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows left by the failed Remember: %d, %v", n, err)
	}
	err = p.Append(bg, "t", "c", llm.UserMessage("hello"), llm.AssistantMessage("boom"))
	if err == nil {
		t.Fatal("Append through the failing trigger succeeded")
	}
	if h, err := p.History(bg, "t", "c", 0); err != nil || len(h) != 0 {
		t.Errorf("after the failed Append, History = %d messages, %v", len(h), err)
	}
	// The connection went back to the pool in a usable state.
	for range 3 {
		if _, err := p.Remember(bg, "t", memory.Item{Text: "The user's dentist is Dr Lee."}); err != nil {
			t.Fatalf("Remember after the failures: %v", err)
		}
	}
}

// TestDiskFull: SQLite's own "database or disk is full" (SQLITE_FULL,
// caused here by PRAGMA max_page_count) surfaces from the write that hit
// it, saying the disk is full; nothing of that write is read back, what
// was written before is intact, and writing works again once there is
// room.
func TestDiskFull(t *testing.T) {
	db := sqlitetest.Open(t, 1) // one connection: the pragma holds for every call
	p := open(t, db, sqlitememory.Config{MaxItemsPerTenant: 100_000})
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+40)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("filler words for the disk ", 400) // 10 KB
	var stored []string
	var full error
	for i := range 100 {
		ids, err := p.Remember(bg, "t", memory.Item{Text: fmt.Sprintf("note%d %s", i, big)}, memory.Item{Text: fmt.Sprintf("note%d second half", i)})
		if err != nil {
			full = err
			break
		}
		stored = append(stored, ids...)
	}
	if full == nil || !strings.Contains(full.Error(), "disk is full") {
		t.Fatalf("Remember past max_page_count: %v, want an error saying the disk is full", full)
	}
	last := len(stored) / 2
	if got, err := p.Recall(bg, "t", fmt.Sprintf("note%d", last), memory.Budget{}); err != nil || len(got) != 0 {
		t.Errorf("the items of the failed Remember are read back: %d, %v", len(got), err)
	}
	got, err := p.Recall(bg, "t", "second half", memory.Budget{})
	if err != nil || len(got) != last {
		t.Errorf("after the full disk, %d of the %d earlier items are recalled, %v", len(got), last, err)
	}
	if err := p.Append(bg, "t", "c", llm.UserMessage(big+big+big+big+big+big), llm.AssistantMessage("ok")); err == nil {
		// Pages freed by nothing: the history write must fail too, or
		// fit; either way it is read back whole or not at all.
		if h, err := p.History(bg, "t", "c", 0); err != nil || len(h) != 2 {
			t.Errorf("History after an Append that succeeded = %d, %v", len(h), err)
		}
	} else if h, err := p.History(bg, "t", "c", 0); err != nil || len(h) != 0 {
		t.Errorf("History after an Append that failed = %d, %v", len(h), err)
	}
	if _, err := db.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Remember(bg, "t", memory.Item{Text: fmt.Sprintf("note%d again", last)}); err != nil {
		t.Errorf("Remember once there is room again: %v", err)
	}
}

// TestRestart: what one process wrote is there for the next, and a
// second Migrate on the migrated file writes nothing.
func TestRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	db := sqlitetest.OpenPath(t, path, 1)
	p := open(t, db, sqlitememory.Config{})
	if err := p.Append(bg, "t", "c", llm.UserMessage("book the dentist"), llm.AssistantMessage("done")); err != nil {
		t.Fatal(err)
	}
	ids, err := p.Remember(bg, "t", memory.Item{Text: "The user's dentist is Dr Kim."})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	db2 := sqlitetest.OpenPath(t, path, 1)
	var before int64
	if err := db2.QueryRow(`PRAGMA data_version`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	p2 := open(t, db2, sqlitememory.Config{})
	if h, err := p2.History(bg, "t", "c", 0); err != nil || len(h) != 2 {
		t.Errorf("History after a restart = %d messages, %v", len(h), err)
	}
	got, err := p2.Recall(bg, "t", "dentists", memory.Budget{})
	if err != nil || len(got) != 1 || got[0].ID != ids[0] {
		t.Errorf("Recall after a restart = %+v, %v", got, err)
	}
	more, err := p2.Remember(bg, "t", memory.Item{Text: "The user's barber is Sam."})
	if err != nil || more[0] <= ids[0] && len(more[0]) <= len(ids[0]) {
		t.Errorf("an ID after a restart: %v after %v, %v", more, ids, err)
	}
}
