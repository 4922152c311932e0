package sqlitedb_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/sqlitestore"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/sqlitedb"
	"github.com/valetkit/valet/trigger"
)

var bg = context.Background()

func newRing(t testing.TB) *credentials.KeyRing {
	t.Helper()
	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key})
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// openDB opens dsn with one connection, River's advice; it is closed when
// t ends.
func openDB(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

// TestOpenAtEveryStart: Open on a new file creates every store's tables;
// a second process's Open on the same file — a new *sql.DB, as after a
// restart — migrates nothing more and reads what the first wrote.
func TestOpenAtEveryStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	ring := newRing(t)
	db := openDB(t, sqlitedb.DSN(path))
	s, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: ring})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Credentials.Save(bg, "ana", "google", "", map[string]string{"token": "t0k"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Memory.Append(bg, "ana", "c1", llm.UserMessage("hi"), llm.AssistantMessage("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Memory.Remember(bg, "ana", memory.Item{Text: "Ana's dentist is Dr. Kim."}); err != nil {
		t.Fatal(err)
	}
	var versions int
	if err := db.QueryRow(`SELECT count(*) FROM valet_schema_versions`).Scan(&versions); err != nil || versions != 4 {
		t.Errorf("recorded versions: %d, %v; want one per store (4)", versions, err)
	}
	entry := &pool.Entry{ID: "e1", TenantID: "ana", ConversationID: "c1", AgentName: "send_email",
		Status: pool.StatusWaitingForApproval, ExpiresAt: time.Now().Add(time.Hour)}
	if err := s.Pool.Create(bg, entry); err != nil {
		t.Fatal(err)
	}
	task := &trigger.Task{ID: "t1", TenantID: "ana", Name: "remind", Status: trigger.StatusActive,
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: time.Now().Add(24 * time.Hour)}},
		Action:  trigger.Action{Instruction: "remind Ana of the dentist"}}
	if err := s.Triggers.Create(bg, task); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db2 := openDB(t, sqlitedb.DSN(path))
	for range 2 {
		s, err = sqlitedb.Open(bg, db2, sqlitedb.Config{KeyRing: ring})
		if err != nil {
			t.Fatalf("Open again: %v", err)
		}
	}
	sec, err := s.Credentials.Get(bg, "ana", "google", "")
	var got map[string]string
	if err == nil {
		err = sec.Decode(&got)
	}
	if err != nil || got["token"] != "t0k" {
		t.Errorf("credential after reopening: %v, %v", got, err)
	}
	if h, err := s.Memory.History(bg, "ana", "c1", 0); err != nil || len(h) != 2 {
		t.Errorf("history after reopening: %d messages, %v", len(h), err)
	}
	if items, err := s.Memory.Recall(bg, "ana", "who is my dentist", memory.Budget{}); err != nil || len(items) != 1 {
		t.Errorf("recall after reopening: %d items, %v", len(items), err)
	}
	if e, err := s.Pool.Get(bg, "ana", "e1"); err != nil || e.AgentName != "send_email" || e.Status != pool.StatusWaitingForApproval {
		t.Errorf("pool entry after reopening: %+v, %v", e, err)
	}
	if got, err := s.Triggers.Get(bg, "ana", "t1"); err != nil || got.Action.Instruction != "remind Ana of the dentist" {
		t.Errorf("task after reopening: %+v, %v", got, err)
	}
}

// TestOpenRejects: what Open cannot use is ErrInvalid, before it touches
// the file.
func TestOpenRejects(t *testing.T) {
	ring, other := newRing(t), newRing(t)
	path := filepath.Join(t.TempDir(), "valet.db")
	db := openDB(t, sqlitedb.DSN(path))
	for name, tt := range map[string]struct {
		db  *sql.DB
		cfg sqlitedb.Config
	}{
		"nil db":    {nil, sqlitedb.Config{KeyRing: ring}},
		"no ring":   {db, sqlitedb.Config{}},
		"two rings": {db, sqlitedb.Config{KeyRing: ring, Credentials: sqlitestore.Config{KeyRing: other}}},
		"bad table": {db, sqlitedb.Config{KeyRing: ring, Credentials: sqlitestore.Config{Table: "sqlite_x"}}},
	} {
		if _, err := sqlitedb.Open(bg, tt.db, tt.cfg); err == nil {
			t.Errorf("%s: Open succeeded", name)
		} else if name != "bad table" && !errors.Is(err, sqlitedb.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Open created the file: %v", err)
	}
	// The same ring in both places is one ring.
	if _, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: ring, Credentials: sqlitestore.Config{KeyRing: ring}}); err != nil {
		t.Errorf("one ring given twice: %v", err)
	}
}

// TestDSN: any file name opens exactly that file — the characters an
// SQLite URI reads as other than the path are escaped — with every
// parameter valet needs in effect on every connection.
func TestDSN(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"valet.db", "a?b.db", "a#b.db", "100%.db", "%3f.db", "with space.db", "ünï.db", "x&mode=ro.db"} {
		path := filepath.Join(dir, name)
		db, err := sql.Open("sqlite", sqlitedb.DSN(path))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		db.SetMaxOpenConns(2)
		conns := make([]*sql.Conn, 2)
		for i := range conns {
			if conns[i], err = db.Conn(bg); err != nil {
				t.Fatalf("%q: %v", name, err)
			}
		}
		for i, c := range conns {
			var busy, fk int
			var mode string
			for q, dst := range map[string]any{"PRAGMA busy_timeout": &busy, "PRAGMA foreign_keys": &fk, "PRAGMA journal_mode": &mode} {
				if err := c.QueryRowContext(bg, q).Scan(dst); err != nil {
					t.Fatalf("%q: %s: %v", name, q, err)
				}
			}
			if busy != 5000 || fk != 1 || mode != "wal" {
				t.Errorf("%q connection %d: busy_timeout %d, foreign_keys %d, journal_mode %q", name, i, busy, fk, mode)
			}
			c.Close()
		}
		db.Close()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%q: the file is not where the path says: %v", name, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	var dbs int
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".db" {
			dbs++
		}
	}
	if dbs != 8 {
		t.Errorf("%d database files in the directory, want 8", dbs)
	}
}
