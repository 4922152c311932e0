package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/sqlitestore"
	"github.com/valetkit/valet/internal/sqlitetest"
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

func TestNewRejects(t *testing.T) {
	ring := newRing(t, "k1", map[string][]byte{"k1": newKey()})
	db := openDSN(t, "file:never-opened.db") // sql.Open connects lazily
	for _, tc := range []struct {
		name string
		db   *sql.DB
		cfg  sqlitestore.Config
		want string
	}{
		{"nil db", nil, sqlitestore.Config{KeyRing: ring}, "needs a *sql.DB"},
		{"nil ring", db, sqlitestore.Config{}, "KeyRing is nil"},
		{"NUL", db, sqlitestore.Config{KeyRing: ring, Table: "a\x00b"}, "NUL"},
		{"not UTF-8", db, sqlitestore.Config{KeyRing: ring, Table: "cr\xffeds"}, "UTF-8"},
		{"reserved", db, sqlitestore.Config{KeyRing: ring, Table: "SQLite_creds"}, "sqlite_"},
		{"batch", db, sqlitestore.Config{KeyRing: ring, RotateBatch: -1}, "negative RotateBatch"},
	} {
		s, err := sqlitestore.New(tc.db, tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, credentials.ErrInvalid) {
			t.Errorf("%s: New = %v, %v; want an error wrapping credentials.ErrInvalid with %q", tc.name, s, err, tc.want)
		}
	}
	if _, err := sqlitestore.New(db, sqlitestore.Config{KeyRing: ring, Table: `my "creds"`}); err != nil {
		t.Errorf("a name that needs quoting: %v", err)
	}
}

// TestNotADatabase: a file of other bytes is refused, saying so, and is
// left as it was; no call reads it as "not found".
func TestNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.txt")
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 'x'}, 2000)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.New(openDSN(t, sqlitetest.DSN(path, "")), sqlitestore.Config{KeyRing: newRing(t, "k1", map[string][]byte{"k1": newKey()})})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(bg); err == nil || !strings.Contains(err.Error(), "not an SQLite database") {
		t.Errorf("Migrate on a file that is not a database: %v", err)
	}
	if _, err := s.Get(bg, "t", "s", ""); err == nil || errors.Is(err, credentials.ErrNotFound) {
		t.Errorf("Get on a file that is not a database: %v", err)
	}
	if err := s.Save(bg, "t", "s", "", map[string]string{"a": "b"}); err == nil {
		t.Error("Save on a file that is not a database succeeded")
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, garbage) {
		t.Error("the file was changed")
	}
}

// TestReadOnly: opened read-only (mode=ro: root ignores permissions),
// a migrated file serves Get and List; Save, Update, Delete and Rotate
// fail saying the database is read-only, and change nothing.
func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	k1 := newKey()
	w := open(t, sqlitetest.OpenPath(t, path, 1), newRing(t, "k1", map[string][]byte{"k1": k1}))
	if err := w.Save(bg, "t", "s", "", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	ro := open(t, openDSN(t, sqlitetest.DSN(path, "mode=ro")), newRing(t, "k2", map[string][]byte{"k1": k1, "k2": newKey()}))
	if _, err := ro.Get(bg, "t", "s", ""); err != nil {
		t.Errorf("Get on a read-only file: %v", err)
	}
	if got, err := ro.List(bg, "t", ""); err != nil || len(got) != 1 {
		t.Errorf("List on a read-only file = %v, %v", got, err)
	}
	_, errRot := ro.Rotate(bg)
	for op, err := range map[string]error{
		"save":   ro.Save(bg, "t", "s", "", map[string]int{"n": 2}),
		"update": ro.Update(bg, "t", "s", "", func(_ context.Context, old credentials.Secret) (any, error) { return old, nil }),
		"delete": ro.Delete(bg, "t", "s", ""),
		"rotate": errRot,
	} {
		if err == nil || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s on a read-only file: %v", op, err)
		}
	}
	var v map[string]int
	if sec, err := w.Get(bg, "t", "s", ""); err != nil || sec.Decode(&v) != nil || v["n"] != 1 {
		t.Errorf("after the refused writes: %v, %v", v, err)
	}
}

// TestSchemaTooNew: a file whose credentials tables a newer valet wrote
// is refused at Migrate, naming both versions.
func TestSchemaTooNew(t *testing.T) {
	db := sqlitetest.Open(t, 1)
	ring := newRing(t, "k1", map[string][]byte{"k1": newKey()})
	open(t, db, ring)
	if _, err := db.Exec(`UPDATE valet_schema_versions SET version = 12 WHERE component = 'credentials/credentials'`); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.New(db, sqlitestore.Config{KeyRing: ring})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Migrate(bg)
	if !errors.Is(err, sqlitestore.ErrSchemaTooNew) {
		t.Fatalf("Migrate of a newer file: %v, want ErrSchemaTooNew", err)
	}
	if want := fmt.Sprintf("version 12, newer than version %d", sqlitestore.SchemaVersion); !strings.Contains(err.Error(), want) {
		t.Errorf("the error does not name both versions (%q): %v", want, err)
	}
}

// TestFailedSaveLeavesNothing: a Save whose row cannot be written (a
// trigger raising an error, as a full disk would) leaves no key check
// behind either: the next ring with other material under the same key
// id is not refused for a key nothing was written under.
func TestFailedSaveLeavesNothing(t *testing.T) {
	db := sqlitetest.Open(t, 2)
	s := open(t, db, newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	if _, err := db.Exec(`CREATE TRIGGER fail BEFORE INSERT ON credentials BEGIN SELECT RAISE(ABORT, 'simulated failure'); END`); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(bg, "t", "s", "", map[string]int{"n": 1}); err == nil || !strings.Contains(err.Error(), "simulated failure") {
		t.Fatalf("Save through the failing trigger: %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM credentials) + (SELECT count(*) FROM credentials_keys)`).Scan(&n); err != nil || n != 0 {
		t.Errorf("rows left by the failed Save: %d, %v", n, err)
	}
	if _, err := db.Exec(`DROP TRIGGER fail`); err != nil {
		t.Fatal(err)
	}
	other := open(t, db, newRing(t, "k1", map[string][]byte{"k1": newKey()}))
	if err := other.Save(bg, "t", "s", "", map[string]int{"n": 2}); err != nil {
		t.Errorf("Save with the first key that wrote anything: %v", err)
	}
}

// TestTwoProcesses: two *sql.DB on one file, as two processes would
// open it, each with a pool of its own, race token refreshes of one
// credential: no refresh is lost.
func TestTwoProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	ring := newRing(t, "k1", map[string][]byte{"k1": newKey()})
	a := open(t, sqlitetest.OpenPath(t, path, 4), ring)
	b := open(t, sqlitetest.OpenPath(t, path, 4), ring)
	if err := a.Save(bg, "t", "google", "", map[string]int{"count": 0}); err != nil {
		t.Fatal(err)
	}
	const each = 20
	var wg sync.WaitGroup
	for i := range 4 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			for range each {
				err := s.Update(bg, "t", "google", "", func(_ context.Context, old credentials.Secret) (any, error) {
					var v map[string]int
					if err := old.Decode(&v); err != nil {
						return nil, err
					}
					v["count"]++
					return v, nil
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	var v map[string]int
	if sec, err := b.Get(bg, "t", "google", ""); err != nil || sec.Decode(&v) != nil || v["count"] != 4*each {
		t.Errorf("after %d Updates from two processes: count %d, %v", 4*each, v["count"], err)
	}
}
