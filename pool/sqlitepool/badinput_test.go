package sqlitepool_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
	"github.com/valetkit/valet/pool/sqlitepool"
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

// entry returns a minimal valid entry expiring in an hour.
func entry(tenantID, id string) *pool.Entry {
	return &pool.Entry{ID: id, TenantID: tenantID, AgentName: "agent", Status: pool.StatusWaitingForInput,
		ExpiresAt: time.Now().Add(time.Hour)}
}

func TestNewRejects(t *testing.T) {
	db := openDSN(t, "file:never-opened.db") // sql.Open connects lazily
	for _, tc := range []struct {
		name string
		db   *sql.DB
		cfg  sqlitepool.Config
		want string
	}{
		{"nil db", nil, sqlitepool.Config{}, "needs a *sql.DB"},
		{"negative cap", db, sqlitepool.Config{MaxPerTenant: -1}, "negative MaxPerTenant"},
		{"negative retention", db, sqlitepool.Config{Retention: -time.Second}, "negative Retention"},
		{"NUL", db, sqlitepool.Config{Table: "a\x00b"}, "NUL"},
		{"not UTF-8", db, sqlitepool.Config{Table: "po\xffol"}, "UTF-8"},
		{"reserved", db, sqlitepool.Config{Table: "SQLITE_pool"}, "sqlite_"},
	} {
		s, err := sqlitepool.New(tc.db, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("%s: New = %v, %v; want an error wrapping pool.ErrInvalidConfig with %q", tc.name, s, err, tc.want)
		}
	}
}

// TestOneFileManyTables: stores on two tables of one file keep apart, the
// table's name quoted whatever it holds.
func TestOneFileManyTables(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	a := open(t, db, sqlitepool.Config{Table: `pending "A"; DROP TABLE x`})
	b := open(t, db, sqlitepool.Config{})
	if err := a.Create(bg, entry("t", "e")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get(bg, "t", "e"); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("a store on another table: Get = %v, want ErrNotFound", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM "pending ""A""; DROP TABLE x"`).Scan(&n); err != nil || n != 1 {
		t.Errorf("rows in the quoted table: %d, %v", n, err)
	}
}

// TestNotADatabase: a file of other bytes is refused at Migrate, saying
// so, no call reads it as "not found", and the file is left as it was.
func TestNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	garbage := bytes.Repeat([]byte("not an SQLite file, only notes. "), 300)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitepool.New(openDSN(t, sqlitetest.DSN(path, "")), sqlitepool.Config{})
	if err != nil {
		t.Fatalf("New sends nothing to the file, so it cannot fail: %v", err)
	}
	if err := s.Migrate(bg); err == nil || !strings.Contains(err.Error(), "not an SQLite database") || !strings.HasPrefix(err.Error(), "sqlitepool: migrate") {
		t.Errorf("Migrate on a file that is not a database: %v", err)
	}
	for op, err := range everyCall(s, "t", "e") {
		if err == nil || errors.Is(err, pool.ErrNotFound) || !strings.Contains(err.Error(), "not an SQLite database") {
			t.Errorf("%s on a file that is not a database: %v", op, err)
		}
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, garbage) {
		t.Error("the file was changed")
	}
}

// everyCall calls every method of s once on the entry tenantID/id and
// returns their errors by name.
func everyCall(s pool.Store, tenantID, id string) map[string]error {
	ctx := context.Background()
	e := entry(tenantID, id)
	_, errGet := s.Get(ctx, tenantID, id)
	_, errList := s.List(ctx, tenantID)
	_, errTake := s.Take(ctx, tenantID, id)
	_, errTakeRev := s.TakeRevision(ctx, tenantID, id, 1)
	u := entry(tenantID, id)
	u.Revision, u.CreatedAt = 1, time.Now()
	return map[string]error{
		"create": s.Create(ctx, e), "update": s.Update(ctx, u), "get": errGet, "list": errList,
		"take": errTake, "take revision": errTakeRev, "delete": s.Delete(ctx, tenantID, id),
	}
}

// TestSchemaTooNew: a file whose pool table a newer valet wrote is refused
// at Migrate, naming the component and both versions, and not changed.
func TestSchemaTooNew(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	open(t, db, sqlitepool.Config{})
	if _, err := db.Exec(`UPDATE valet_schema_versions SET version = 9 WHERE component = 'pool/pool_entries'`); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitepool.New(db, sqlitepool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Migrate(bg)
	if !errors.Is(err, sqlitepool.ErrSchemaTooNew) {
		t.Fatalf("Migrate of a newer file: %v, want ErrSchemaTooNew", err)
	}
	want := fmt.Sprintf("version 9, newer than version %d", sqlitepool.SchemaVersion)
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "pool/pool_entries") {
		t.Errorf("the error does not name the component and both versions (%q): %v", want, err)
	}
	var v int
	if err := db.QueryRow(`SELECT version FROM valet_schema_versions WHERE component = 'pool/pool_entries'`).Scan(&v); err != nil || v != 9 {
		t.Errorf("the recorded version is now %d, %v", v, err)
	}
}

// TestReadOnly: a file opened read-only (mode=ro; root ignores file
// permissions) serves Get and List once migrated; every write fails
// saying the database is read-only, and the entry is still there.
func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	w := open(t, sqlitetest.OpenPath(t, path, 1), sqlitepool.Config{})
	e := pooltest.NewEntry("t", "e")
	if err := w.Create(bg, e); err != nil {
		t.Fatal(err)
	}
	ro := open(t, openDSN(t, sqlitetest.DSN(path, "mode=ro")), sqlitepool.Config{})
	if got, err := ro.Get(bg, "t", "e"); err != nil || len(pooltest.Diff(e, got)) > 0 {
		t.Errorf("Get on a read-only file: %v, %v", pooltest.Diff(e, got), err)
	}
	if got, err := ro.List(bg, "t"); err != nil || len(got) != 1 {
		t.Errorf("List on a read-only file: %d entries, %v", len(got), err)
	}
	u := e.Clone()
	u.Paused = false
	_, errTake := ro.Take(bg, "t", "e")
	_, errTakeRev := ro.TakeRevision(bg, "t", "e", e.Revision)
	for op, err := range map[string]error{
		"create": ro.Create(bg, entry("t", "new")), "update": ro.Update(bg, u),
		"take": errTake, "take revision": errTakeRev, "delete": ro.Delete(bg, "t", "e"),
	} {
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s on a read-only file: %v", op, err)
		}
	}
	if got, err := w.Get(bg, "t", "e"); err != nil || len(pooltest.Diff(e, got)) > 0 {
		t.Errorf("after the refused writes: %v, %v", pooltest.Diff(e, got), err)
	}
}

// TestHostileIDs: IDs and tenants holding separators, quotes, SQL and a
// NUL byte (in an ID; a tenant with one is refused) are kept apart byte
// by byte and never read as anything but data.
func TestHostileIDs(t *testing.T) {
	s := open(t, sqlitetest.Open(t, 2), sqlitepool.Config{})
	pairs := [][2]string{
		{"a", "b\x00"}, {"a", "b"}, {"a", "\x00b"}, {"a", "b\x00c"}, {"a\x01", "b"},
		{"x'); DROP TABLE pool_entries; --", "\"; DELETE FROM pool_entries"},
		{"%", "_"}, {"a", "%"}, {"{t}", "}{:"}, {"é", "e\u0301"},
	}
	for _, p := range pairs {
		e := entry(p[0], p[1])
		e.Task = fmt.Sprintf("%q", p)
		if err := s.Create(bg, e); err != nil {
			t.Fatalf("Create(%q, %q): %v", p[0], p[1], err)
		}
	}
	for _, p := range pairs {
		got, err := s.Get(bg, p[0], p[1])
		if err != nil || got.Task != fmt.Sprintf("%q", p) {
			t.Errorf("Get(%q, %q) = %+v, %v", p[0], p[1], got, err)
		}
	}
	if list, err := s.List(bg, "a"); err != nil || len(list) != 5 {
		t.Errorf("List(a) = %d entries, %v; want 5", len(list), err)
	}
	if _, err := s.Take(bg, "a", "b\x00"); err != nil {
		t.Fatalf("Take(a, b NUL): %v", err)
	}
	if _, err := s.Get(bg, "a", "b"); err != nil {
		t.Errorf("taking %q took %q too: %v", "b\x00", "b", err)
	}
	// A LIKE pattern is not one.
	if _, err := s.Get(bg, "a", "_"); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Get(a, _) = %v, want ErrNotFound", err)
	}
	// A tenant with a NUL is refused on the way in, and not found on
	// the way out.
	if err := s.Create(bg, entry("t\x00", "e")); !errors.Is(err, pool.ErrInvalidEntry) {
		t.Errorf("Create with a NUL in the tenant: %v, want ErrInvalidEntry", err)
	}
	for op, err := range everyCall(s, "a\x00", "b") {
		if op == "create" || op == "update" {
			if !errors.Is(err, pool.ErrInvalidEntry) {
				t.Errorf("%s with a NUL in the tenant: %v, want ErrInvalidEntry", op, err)
			}
			continue
		}
		if err != nil && !errors.Is(err, pool.ErrNotFound) {
			t.Errorf("%s with a NUL in the tenant: %v, want ErrNotFound", op, err)
		}
	}
}

// TestHugeEntry: an entry of 4 MiB of state (text SQLite keeps in
// overflow pages) round-trips whole, and leaves the pool whole.
func TestHugeEntry(t *testing.T) {
	s := open(t, sqlitetest.Open(t, 1), sqlitepool.Config{})
	e := pooltest.NewEntry("t", "huge")
	blob := strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789 \"\\\u00e9\x00\n", 4<<20/44)
	state, err := json.Marshal(map[string]string{"blob": blob})
	if err != nil {
		t.Fatal(err)
	}
	e.State = state
	if err := s.Create(bg, e); err != nil {
		t.Fatalf("Create of a %d-byte entry: %v", len(state), err)
	}
	got, err := s.Take(bg, "t", "huge")
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]string
	if err := json.Unmarshal(got.State, &back); err != nil || back["blob"] != blob {
		t.Errorf("the state came back %d bytes long, %v; want %d", len(back["blob"]), err, len(blob))
	}
}

// TestCancelledWhileWaiting: a Create waiting for the file's write lock,
// held by another process, ends when its ctx does, with ctx's error, and
// writes nothing once the lock is free.
func TestCancelledWhileWaiting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	s := open(t, sqlitetest.OpenPath(t, path, 1), sqlitepool.Config{})
	other := sqlitetest.OpenPath(t, path, 1)
	conn, err := other.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(bg, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	err = s.Create(ctx, entry("t", "late"))
	t.Logf("Create returned after %v: %v", time.Since(began), err)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "sqlitepool: create") {
		t.Errorf("Create past its deadline: %v; want context.DeadlineExceeded", err)
	}
	if _, err := conn.ExecContext(bg, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(bg, "t", "late"); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("the cancelled Create wrote its entry: %v", err)
	}
	if err := s.Create(bg, entry("t", "late")); err != nil {
		t.Errorf("Create once the lock is free: %v", err)
	}
}

// TestClosedDatabase: every call on a closed *sql.DB fails saying so,
// named by its operation, never as "not found", and does not panic.
func TestClosedDatabase(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	s := open(t, db, sqlitepool.Config{})
	if err := s.Create(bg, entry("t", "e")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	for op, err := range everyCall(s, "t", "e") {
		if err == nil || errors.Is(err, pool.ErrNotFound) || !strings.Contains(err.Error(), "database is closed") ||
			!strings.HasPrefix(err.Error(), "sqlitepool: "+op) {
			t.Errorf("%s on a closed database: %v", op, err)
		}
	}
	if err := s.Migrate(bg); err == nil || !strings.Contains(err.Error(), "database is closed") {
		t.Errorf("Migrate on a closed database: %v", err)
	}
}

// TestMissingMigrate: a store used before Migrate says to run it.
func TestMissingMigrate(t *testing.T) {
	s, err := sqlitepool.New(sqlitetest.Open(t, 1), sqlitepool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for op, err := range everyCall(s, "t", "e") {
		if err == nil || !strings.Contains(err.Error(), "run Migrate first") {
			t.Errorf("%s before Migrate: %v", op, err)
		}
	}
}

// TestCorruptRows: a row whose entry does not decode, or holds another
// key's entry or another revision, is never returned: Get and Take report
// pool.ErrCorrupt and remove it, List leaves it out and removes it.
func TestCorruptRows(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	var logs bytes.Buffer
	s := open(t, db, sqlitepool.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, id := range []string{"garbled", "moved", "revision", "listed", "fine"} {
		if err := s.Create(bg, entry("t", id)); err != nil {
			t.Fatal(err)
		}
	}
	moved, err := json.Marshal(entry("other", "moved"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		query string
		args  []any
	}{
		{`UPDATE pool_entries SET entry = '{"id":' WHERE id IN ('garbled', 'listed')`, nil},
		{`UPDATE pool_entries SET entry = ? WHERE id = 'moved'`, []any{string(moved)}},
		{`UPDATE pool_entries SET revision = 7 WHERE id = 'revision'`, nil},
	} {
		if _, err := db.Exec(q.query, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get(bg, "t", "garbled"); !errors.Is(err, pool.ErrCorrupt) {
		t.Errorf("Get of a garbled row: %v, want ErrCorrupt", err)
	}
	if _, err := s.Take(bg, "t", "moved"); !errors.Is(err, pool.ErrCorrupt) {
		t.Errorf("Take of a row holding another tenant's entry: %v, want ErrCorrupt", err)
	}
	if _, err := s.TakeRevision(bg, "t", "revision", 7); !errors.Is(err, pool.ErrCorrupt) {
		t.Errorf("TakeRevision of a row at another revision than its entry: %v, want ErrCorrupt", err)
	}
	list, err := s.List(bg, "t")
	if err != nil || len(list) != 1 || list[0].ID != "fine" {
		t.Errorf("List = %d entries, %v; want only the fine one", len(list), err)
	}
	var ids []string
	rows, err := db.Query(`SELECT id FROM pool_entries ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 1 || ids[0] != "fine" {
		t.Errorf("rows left: %v; want only the fine one", ids)
	}
	for _, id := range []string{"garbled", "moved", "revision", "listed"} {
		if !strings.Contains(logs.String(), "corrupt pool entry\" tenant=t id="+id+" ") {
			t.Errorf("no warning names the corrupt entry %q:\n%s", id, logs.String())
		}
	}
}

// TestSweep: rows whose retention has ended leave the file: a tenant's at
// its next Create, every tenant's at a Create a minute after the last
// sweep, so the file does not grow with entries nobody reads.
func TestSweep(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	clk := clocktest.New(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	s := open(t, db, sqlitepool.Config{Clock: clk, Retention: time.Hour})
	mk := func(tenantID, id string) {
		t.Helper()
		e := entry(tenantID, id)
		e.ExpiresAt = clk.Now().Add(time.Minute)
		if err := s.Create(bg, e); err != nil {
			t.Fatal(err)
		}
	}
	rows := func() int {
		t.Helper()
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM pool_entries`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	mk("a", "1")
	mk("b", "1")
	clk.Advance(30 * time.Second)
	mk("c", "1")
	clk.Advance(time.Minute + time.Hour) // a's, b's and c's retention ended (c's just)
	if _, err := s.Get(bg, "a", "1"); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Get past retention: %v, want ErrNotFound", err)
	}
	if n := rows(); n != 3 {
		t.Fatalf("%d rows before any Create; want 3", n)
	}
	mk("a", "2") // more than a minute since the last sweep: every tenant's
	if n := rows(); n != 1 {
		t.Errorf("%d rows after a Create past retention; want 1 (the new one)", n)
	}
}

// TestIDNotUTF8: an ID that is not UTF-8 cannot survive the entry's JSON
// (encoding/json replaces its bytes), so Create and Update refuse it with
// pool.ErrInvalidEntry instead of storing an entry nobody could read back.
func TestIDNotUTF8(t *testing.T) {
	s := open(t, sqlitetest.Open(t, 1), sqlitepool.Config{})
	e := entry("t", "agt_\xff")
	if err := s.Create(bg, e); !errors.Is(err, pool.ErrInvalidEntry) || !strings.Contains(err.Error(), "UTF-8") {
		t.Errorf("Create with an ID that is not UTF-8: %v; want ErrInvalidEntry naming UTF-8", err)
	}
	e.Revision, e.CreatedAt = 1, time.Now()
	if err := s.Update(bg, e); !errors.Is(err, pool.ErrInvalidEntry) {
		t.Errorf("Update with an ID that is not UTF-8: %v; want ErrInvalidEntry", err)
	}
	if _, err := s.Get(bg, "t", "agt_\xff"); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Get with an ID that is not UTF-8: %v; want ErrNotFound", err)
	}
}
