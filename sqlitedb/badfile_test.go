package sqlitedb_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/sqlitedb"
)

// TestOpenNotADatabase: a file of other bytes is refused, naming the
// store and saying what the file is not, and is left as it was.
func TestOpenNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	garbage := bytes.Repeat([]byte("not an SQLite file, just notes. "), 300)
	if err := os.WriteFile(path, garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := sqlitedb.Open(bg, openDB(t, sqlitedb.DSN(path)), sqlitedb.Config{KeyRing: newRing(t)})
	if err == nil || !strings.HasPrefix(err.Error(), "sqlitedb: credentials:") || !strings.Contains(err.Error(), "not an SQLite database") {
		t.Errorf("Open of a file that is not a database: %v", err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, garbage) {
		t.Error("the file was changed")
	}
}

// TestOpenReadOnly: a file opened read-only — mode=ro, or query_only —
// (root ignores file permissions, so a chmod would prove nothing here)
// opens once migrated and serves reads; each write fails saying the
// database is read-only and changes nothing; a read-only file that was
// never migrated is refused by Open.
func TestOpenReadOnly(t *testing.T) {
	for _, param := range []string{"mode=ro", "_pragma=query_only(1)"} {
		t.Run(param, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "valet.db")
			ring := newRing(t)
			rw, err := sqlitedb.Open(bg, openDB(t, sqlitedb.DSN(path)), sqlitedb.Config{KeyRing: ring})
			if err != nil {
				t.Fatal(err)
			}
			if err := rw.Memory.Append(bg, "ana", "c1", llm.UserMessage("hi"), llm.AssistantMessage("hello")); err != nil {
				t.Fatal(err)
			}
			if err := rw.Credentials.Save(bg, "ana", "google", "", map[string]string{"token": "t0k"}); err != nil {
				t.Fatal(err)
			}

			ro, err := sqlitedb.Open(bg, openDB(t, sqlitedb.DSN(path)+"&"+param), sqlitedb.Config{KeyRing: ring})
			if err != nil {
				t.Fatalf("Open of a migrated read-only file: %v", err)
			}
			if h, err := ro.Memory.History(bg, "ana", "c1", 0); err != nil || len(h) != 2 {
				t.Errorf("History: %d messages, %v", len(h), err)
			}
			if _, err := ro.Credentials.Get(bg, "ana", "google", ""); err != nil {
				t.Errorf("Get: %v", err)
			}
			for op, err := range map[string]error{
				"append": ro.Memory.Append(bg, "ana", "c1", llm.UserMessage("again"), llm.AssistantMessage("no")),
				"save":   ro.Credentials.Save(bg, "ana", "google", "", map[string]string{"token": "other"}),
			} {
				if err == nil || !strings.Contains(err.Error(), "the database is read-only") {
					t.Errorf("%s on a read-only file: %v", op, err)
				}
			}
			if h, err := rw.Memory.History(bg, "ana", "c1", 0); err != nil || len(h) != 2 {
				t.Errorf("after the refused writes: %d messages, %v", len(h), err)
			}

			fresh := filepath.Join(t.TempDir(), "fresh.db")
			if err := openDB(t, sqlitedb.DSN(fresh)).Ping(); err != nil { // an empty database
				t.Fatal(err)
			}
			_, err = sqlitedb.Open(bg, openDB(t, sqlitedb.DSN(fresh)+"&"+param), sqlitedb.Config{KeyRing: ring})
			if err == nil || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("Open of a read-only file never migrated: %v", err)
			}
		})
	}
}

// TestOpenSchemaTooNew: a file a newer valet wrote is refused with
// ErrSchemaTooNew, naming the component and both versions, and is not
// changed.
func TestOpenSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "valet.db")
	db := openDB(t, sqlitedb.DSN(path))
	if _, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: newRing(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE valet_schema_versions SET version = 9`); err != nil {
		t.Fatal(err)
	}
	changes := func() (n int) {
		t.Helper()
		if err := db.QueryRow(`SELECT total_changes()`).Scan(&n); err != nil { // rows written on the one connection
			t.Fatal(err)
		}
		return n
	}
	before := changes()
	_, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: newRing(t)})
	var verr *sqlitedb.VersionError
	if !errors.Is(err, sqlitedb.ErrSchemaTooNew) || !errors.As(err, &verr) {
		t.Fatalf("Open of a newer file: %v, want ErrSchemaTooNew", err)
	}
	if verr.File != 9 || verr.Code != 1 || verr.Component != "credentials/credentials" {
		t.Errorf("VersionError %+v", verr)
	}
	if !strings.Contains(err.Error(), "version 9, newer than version 1") || !strings.Contains(err.Error(), "upgrade valet") {
		t.Errorf("the error does not name both versions and what to do: %v", err)
	}
	if after := changes(); after != before {
		t.Errorf("Open wrote %d rows to the newer file", after-before)
	}
	var versions string
	if err := db.QueryRow(`SELECT group_concat(component || '=' || version, ' ') FROM (SELECT * FROM valet_schema_versions ORDER BY component)`).Scan(&versions); err != nil ||
		versions != "credentials/credentials=9 memory/memory_=9 pool/pool_entries=9 trigger/valet_trigger=9" {
		t.Errorf("versions after the refused Open: %q, %v", versions, err)
	}
}

// TestFullDisk: with the file at its largest (PRAGMA max_page_count, as a
// full disk), a write fails saying so; what is read back is every turn
// written before, whole, and no part of the refused one; a refused Save
// leaves the credential as it was; once there is room again the next
// write works.
func TestFullDisk(t *testing.T) {
	db := openDB(t, sqlitedb.DSN(filepath.Join(t.TempDir(), "valet.db"))) // one connection: the pragma stays on it
	s, err := sqlitedb.Open(bg, db, sqlitedb.Config{KeyRing: newRing(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Credentials.Save(bg, "ana", "google", "", map[string]string{"token": "first"}); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages+8)); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("a long answer that fills the page ", 60) // ~2 KB a message
	var turns int
	var full error
	for turns < 1000 {
		err := s.Memory.Append(bg, "ana", "c1",
			llm.UserMessage(fmt.Sprintf("question %d", turns)), llm.AssistantMessage(fmt.Sprintf("answer %d %s", turns, big)))
		if err != nil {
			full = err
			break
		}
		turns++
	}
	if full == nil || !strings.Contains(full.Error(), "disk is full") {
		t.Fatalf("after %d turns the write failed with %v, want a full disk", turns, full)
	}
	if turns == 0 {
		t.Fatal("no turn fitted: the test proves nothing about what was written before")
	}
	check := func(wantTurns int) {
		t.Helper()
		h, err := s.Memory.History(bg, "ana", "c1", 0)
		if err != nil {
			t.Fatalf("History after the full disk: %v", err)
		}
		if len(h) != 2*wantTurns {
			t.Fatalf("History holds %d messages, want %d (whole turns only)", len(h), 2*wantTurns)
		}
		for i := 0; i < len(h); i += 2 {
			if h[i].Content != fmt.Sprintf("question %d", i/2) || !strings.HasPrefix(h[i+1].Content, fmt.Sprintf("answer %d ", i/2)) || len(h[i+1].Content) != len(fmt.Sprintf("answer %d %s", i/2, big)) {
				t.Fatalf("turn %d read back as %q / %d bytes", i/2, h[i].Content, len(h[i+1].Content))
			}
		}
	}
	check(turns)
	if err := s.Credentials.Save(bg, "ana", "google", "", map[string]string{"token": strings.Repeat("x", 64<<10)}); err == nil || !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("Save on a full disk: %v", err)
	}
	sec, err := s.Credentials.Get(bg, "ana", "google", "")
	var got map[string]string
	if err == nil {
		err = sec.Decode(&got)
	}
	if err != nil || got["token"] != "first" {
		t.Errorf("the credential after the refused Save: %v, %v", got["token"], err)
	}

	if _, err := db.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.Memory.Append(bg, "ana", "c1", llm.UserMessage(fmt.Sprintf("question %d", turns)), llm.AssistantMessage(fmt.Sprintf("answer %d %s", turns, big))); err != nil {
		t.Fatalf("Append once there is room: %v", err)
	}
	check(turns + 1)
}
