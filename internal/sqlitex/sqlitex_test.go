package sqlitex_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/internal/sqlitex"
)

var bg = context.Background()

func TestCheckName(t *testing.T) {
	for _, bad := range []string{"", "a\x00b", "\xff", "sqlite_x", "SQLITE_master"} {
		if sqlitex.CheckName(bad) == nil {
			t.Errorf("CheckName(%q) = nil", bad)
		}
	}
	for _, good := range []string{"credentials", `we"ird`, "my table", "sqlite", "ünï"} {
		if err := sqlitex.CheckName(good); err != nil {
			t.Errorf("CheckName(%q) = %v", good, err)
		}
	}
}

// TestQuote: a quoted name is one identifier, whatever it holds.
func TestQuote(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	for _, name := range []string{`a"b`, `x"; DROP TABLE y; --`, "with space", `""`} {
		if _, err := db.Exec(`CREATE TABLE ` + sqlitex.Quote(name) + ` (v)`); err != nil {
			t.Errorf("CREATE TABLE %s: %v", sqlitex.Quote(name), err)
			continue
		}
		var got string
		if err := db.QueryRow(`SELECT name FROM sqlite_schema WHERE name = ?`, name).Scan(&got); err != nil || got != name {
			t.Errorf("table %q is named %q, %v", name, got, err)
		}
	}
}

// TestCheckBusyTimeout: a file opened without a busy timeout is refused
// at Migrate, naming the parameter to add.
func TestCheckBusyTimeout(t *testing.T) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = sqlitex.Migrate(bg, db, "c", 1, func(sqlitex.Querier, int) error { return nil })
	if !errors.Is(err, sqlitex.ErrNoBusyTimeout) || !strings.Contains(err.Error(), "busy_timeout(5000)") {
		t.Errorf("Migrate without a busy timeout: %v", err)
	}
}

// TestMigrateVersions: up runs once per version step with the version
// the file had; the journal becomes WAL; a newer file is refused.
func TestMigrateVersions(t *testing.T) {
	db := sqlitetest.OpenPath(t, filepath.Join(t.TempDir(), "v.db"), 1)
	if _, err := db.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	var froms []int
	up := func(q sqlitex.Querier, from int) error {
		froms = append(froms, from)
		_, err := q.ExecContext(bg, `CREATE TABLE IF NOT EXISTS t (v)`)
		return err
	}
	for _, v := range []int{1, 1, 3, 3} {
		if err := sqlitex.Migrate(bg, db, "comp", v, up); err != nil {
			t.Fatalf("Migrate to %d: %v", v, err)
		}
	}
	if len(froms) != 2 || froms[0] != 0 || froms[1] != 1 {
		t.Errorf("up ran from %v, want [0 1]", froms)
	}
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode after Migrate = %q, %v", mode, err)
	}
	err := sqlitex.Migrate(bg, db, "comp", 2, up)
	var verr *sqlitex.VersionError
	if !errors.As(err, &verr) || verr.File != 3 || verr.Code != 2 || !errors.Is(err, sqlitex.ErrSchemaTooNew) {
		t.Errorf("Migrate to an older version: %v", err)
	}
	if err := sqlitex.Migrate(bg, db, "other", 1, up); err != nil {
		t.Errorf("another component: %v", err)
	}
}

// TestMigrateTwoProcesses: processes starting together on a new file
// all migrate; up runs once.
func TestMigrateTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	var ups atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		db := sqlitetest.OpenPath(t, path, 2)
		wg.Go(func() {
			<-start
			err := sqlitex.Migrate(bg, db, "comp", 1, func(q sqlitex.Querier, from int) error {
				ups.Add(1)
				_, err := q.ExecContext(bg, `CREATE TABLE t (v)`) // fails if run twice
				return err
			})
			if err != nil {
				t.Errorf("Migrate: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if n := ups.Load(); n != 1 {
		t.Errorf("up ran %d times", n)
	}
}

// TestWriteTxRollsBack: a failing fn, or a ctx ending in fn, leaves
// nothing written, and the connection is usable after.
func TestWriteTxRollsBack(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	if _, err := db.Exec(`CREATE TABLE t (v)`); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := sqlitex.WriteTx(bg, db, func(q sqlitex.Querier) error {
		if _, err := q.ExecContext(bg, `INSERT INTO t VALUES (1)`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Errorf("WriteTx = %v, want fn's error", err)
	}
	ctx, cancel := context.WithCancel(bg)
	err = sqlitex.WriteTx(ctx, db, func(q sqlitex.Querier) error {
		if _, err := q.ExecContext(ctx, `INSERT INTO t VALUES (2)`); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("WriteTx whose ctx ended = %v", err)
	}
	if err := sqlitex.WriteTx(bg, db, func(q sqlitex.Querier) error {
		_, err := q.ExecContext(bg, `INSERT INTO t VALUES (3)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := db.QueryRow(`SELECT sum(v) FROM t`).Scan(&sum); err != nil || sum != 3 {
		t.Errorf("sum after the rolled-back transactions = %d, %v; want 3", sum, err)
	}
}

// TestDSNParams: the parameters the packages document take effect with
// modernc.org/sqlite, on every connection of a pool.
func TestDSNParams(t *testing.T) {
	db := sqlitetest.Open(t, 3)
	conns := make([]*sql.Conn, 3)
	for i := range conns {
		c, err := db.Conn(bg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns[i] = c
	}
	for i, c := range conns {
		var busy, fk int
		var mode string
		for q, dst := range map[string]any{"PRAGMA busy_timeout": &busy, "PRAGMA foreign_keys": &fk, "PRAGMA journal_mode": &mode} {
			if err := c.QueryRowContext(bg, q).Scan(dst); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if busy != 5000 || fk != 1 || mode != "wal" {
			t.Errorf("connection %d: busy_timeout %d, foreign_keys %d, journal_mode %q", i, busy, fk, mode)
		}
	}
}

// TestExplainBusyAtOnce: a transaction that read before writing meets
// another connection's commit with SQLITE_BUSY without waiting out the
// busy timeout (waiting could not help); Explain says so rather than
// blaming a lock held past the timeout.
func TestExplainBusyAtOnce(t *testing.T) {
	db := sqlitetest.Open(t, 2)
	if _, err := db.Exec(`CREATE TABLE t (v)`); err != nil {
		t.Fatal(err)
	}
	reader, err := db.BeginTx(bg, nil) // deferred: reads first
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback()
	var n int
	if err := reader.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	// Another connection writes and commits while the reader's snapshot
	// is open: the reader can no longer become a writer.
	if err := sqlitex.WriteTx(bg, db, func(q sqlitex.Querier) error {
		_, err := q.ExecContext(bg, `INSERT INTO t VALUES (1)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	_, err = reader.Exec(`INSERT INTO t VALUES (2)`)
	if sqlitex.Code(err) != 5 {
		t.Fatalf("the reader's write = %v, want SQLITE_BUSY", err)
	}
	if msg := sqlitex.Explain(err).Error(); !strings.Contains(msg, "at once") || !strings.Contains(msg, "deadlock") {
		t.Errorf("Explain = %q, want it to say SQLite answers at once where waiting could deadlock", msg)
	}
}
