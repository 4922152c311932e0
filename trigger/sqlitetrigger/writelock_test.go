package sqlitetrigger_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
)

// The first statement of the Store's write transactions, a DELETE on the
// empty valet_trigger_write, takes SQLite's write lock: while one
// connection's transaction holds it, another connection cannot begin a
// write (BEGIN IMMEDIATE fails past its busy timeout).
func TestEmptyDeleteTakesTheWriteLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	newStoreAt(t, path)
	ctx := context.Background()
	a := sqlitetest.OpenPath(t, path, 1)
	b, err := sqlOpenShortBusy(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	tx, err := a.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM valet_trigger_write`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ExecContext(ctx, `BEGIN IMMEDIATE`); err == nil {
		_, _ = b.ExecContext(ctx, `ROLLBACK`)
		t.Fatal("another connection began a write while the DELETE's transaction was open")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatalf("after the rollback: %v", err)
	}
	_, _ = b.ExecContext(ctx, `ROLLBACK`)
}

// sqlOpenShortBusy opens path with a 50 ms busy timeout and one
// connection.
func sqlOpenShortBusy(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(50)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
