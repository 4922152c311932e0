package sqlitetrigger_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

func openDSN(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func TestNewRejects(t *testing.T) {
	db := openDSN(t, "file:never-opened.db") // sql.Open connects lazily
	for _, tc := range []struct {
		name string
		db   *sql.DB
		cfg  sqlitetrigger.Config
		want string
	}{
		{"nil db", nil, sqlitetrigger.Config{}, "needs a *sql.DB"},
		{"negative", db, sqlitetrigger.Config{MaxWorkers: -1}, "negative setting"},
		{"rescue", db, sqlitetrigger.Config{JobTimeout: time.Hour, RescueStuckJobsAfter: time.Minute}, "not above JobTimeout"},
		{"queue", db, sqlitetrigger.Config{Queue: strings.Repeat("q", 130)}, "not a River queue name"},
	} {
		s, err := sqlitetrigger.New(tc.db, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s: New = %v, %v; want an error wrapping trigger.ErrInvalid with %q", tc.name, s, err, tc.want)
		}
	}
}

// A task whose wall budget reaches the job timeout is refused: River
// would cancel it before the engine's own limit does.
func TestMaxWallReachingJobTimeout(t *testing.T) {
	s, _ := newStore(t, sqlitetrigger.Config{JobTimeout: time.Minute})
	task := oneTime("a", "long", time.Now().Add(time.Hour))
	task.NextRun = task.Trigger.Schedule.At
	task.Budget.MaxWall = time.Minute
	if err := s.Create(context.Background(), task); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("Create = %v, want ErrInvalid", err)
	}
}

// TestNotADatabase: a file of other bytes is refused, saying so, and is
// left as it was; no call reads it as "not found".
func TestNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.txt")
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 'x'}, 2000)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitetrigger.New(openDSN(t, sqlitetest.DSN(path, "")), sqlitetrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err == nil || !strings.Contains(err.Error(), "not an SQLite database") {
		t.Errorf("Migrate on a file that is not a database: %v", err)
	}
	if _, err := s.Get(ctx, "t", "x"); err == nil || errors.Is(err, trigger.ErrNotFound) {
		t.Errorf("Get on a file that is not a database: %v", err)
	}
	if err := s.Create(ctx, oneTime("t", "x", time.Now())); err == nil {
		t.Error("Create on a file that is not a database succeeded")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, garbage) {
		t.Error("the file was changed")
	}
}

// TestNewerSchemaRefused: a file whose trigger tables a newer valet
// wrote is refused, naming both versions, before River's migrations
// touch it.
func TestNewerSchemaRefused(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	ctx := context.Background()
	if _, err := db.Exec(`CREATE TABLE valet_schema_versions (component TEXT PRIMARY KEY, version INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO valet_schema_versions VALUES ('trigger/valet_trigger', 7)`); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitetrigger.New(db, sqlitetrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Migrate(ctx)
	if !errors.Is(err, sqlitetrigger.ErrSchemaTooNew) || !strings.Contains(err.Error(), "version 7") ||
		!strings.Contains(err.Error(), "version 1") {
		t.Fatalf("Migrate = %v, want ErrSchemaTooNew naming versions 7 and 1", err)
	}
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name LIKE 'river%'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("River's migrations ran on a refused file: %d river tables", tables)
	}
}

// Migrate at every start: the second writes nothing and a task made
// before it is kept.
func TestMigrateTwice(t *testing.T) {
	s, db := newStore(t, sqlitetrigger.Config{})
	ctx := context.Background()
	task := oneTime("a", "kept", time.Now().Add(time.Hour))
	task.NextRun = task.Trigger.Schedule.At
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	// One connection: total_changes counts the rows it wrote.
	var before, after int
	if err := db.QueryRow(`SELECT total_changes()`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT total_changes()`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the second Migrate changed %d rows", after-before)
	}
	if _, err := s.Get(ctx, "a", "kept"); err != nil {
		t.Fatal(err)
	}
	if st := jobStates(t, db, "kept"); st["scheduled"] != 1 {
		t.Errorf("the task's job after a second Migrate: %v", st)
	}
}

func TestNoBusyTimeout(t *testing.T) {
	db := openDSN(t, "file:"+filepath.Join(t.TempDir(), "valet.db"))
	s, err := sqlitetrigger.New(db, sqlitetrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); !errors.Is(err, sqlitetrigger.ErrNoBusyTimeout) {
		t.Fatalf("Migrate without a busy timeout = %v, want ErrNoBusyTimeout", err)
	}
}

func TestNotMigrated(t *testing.T) {
	s, err := sqlitetrigger.New(sqlitetest.Open(t, 1), sqlitetrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Create(context.Background(), oneTime("a", "b", time.Now()))
	if err == nil || !strings.Contains(err.Error(), "run Migrate first") {
		t.Fatalf("Create before Migrate: %v", err)
	}
}

func TestMigrateCancelled(t *testing.T) {
	s, err := sqlitetrigger.New(sqlitetest.Open(t, 1), sqlitetrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Migrate(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Migrate with a cancelled ctx = %v, want context.Canceled", err)
	}
}

// A read-only file is refused on write, saying so; reads still work.
func TestReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	s, _ := newStoreAt(t, path)
	ctx := context.Background()
	task := oneTime("a", "x", time.Now().Add(time.Hour))
	task.NextRun = task.Trigger.Schedule.At
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	ro, err := sqlitetrigger.New(openDSN(t, sqlitetest.DSN(path, "mode=ro")), sqlitetrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.Migrate(ctx); err != nil {
		t.Fatalf("Migrate of an up-to-date read-only file: %v", err)
	}
	if _, err := ro.Get(ctx, "a", "x"); err != nil {
		t.Fatalf("Get on a read-only file: %v", err)
	}
	task2 := oneTime("a", "y", time.Now().Add(time.Hour))
	if err := ro.Create(ctx, task2); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("Create on a read-only file: %v", err)
	}
}

// newStoreAt returns a migrated Store on the file at path.
func newStoreAt(t *testing.T, path string) (*sqlitetrigger.Store, *sql.DB) {
	t.Helper()
	db := sqlitetest.OpenPath(t, path, 1)
	s, err := sqlitetrigger.New(db, sqlitetrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s, db
}
