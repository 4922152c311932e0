package sqlitepool_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// TestFullDisk: when the file cannot grow (SQLite's max_page_count, which
// fails a write with the error a full disk gives, SQLITE_FULL), a Create
// or an Update that needs more room fails saying the disk is full, and
// nothing half-written is read back: the new entry is not there, the
// updated one is as it was. Once there is room, writes succeed.
func TestFullDisk(t *testing.T) {
	db := sqlitetest.Open(t, 1) // max_page_count is the connection's
	s := open(t, db, sqlitepool.Config{})
	kept := pooltest.NewEntry("t", "kept")
	if err := s.Create(bg, kept); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA max_page_count = ` + strconv.Itoa(pages)); err != nil {
		t.Fatal(err)
	}
	big, err := json.Marshal(map[string]string{"draft": strings.Repeat("a long draft ", 20000)})
	if err != nil {
		t.Fatal(err)
	}

	e := pooltest.NewEntry("t", "new")
	e.State = big
	err = s.Create(bg, e)
	t.Logf("Create on a full disk: %v", err)
	if err == nil || !strings.Contains(err.Error(), "the disk is full; nothing of this call was written") {
		t.Errorf("Create on a full disk: %v; want an error saying the disk is full", err)
	}
	if _, err := s.Get(bg, "t", "new"); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("after the failed Create, Get = %v; want ErrNotFound", err)
	}
	u, err := s.Get(bg, "t", "kept")
	if err != nil {
		t.Fatal(err)
	}
	u.State = big
	if err := s.Update(bg, u); err == nil || !strings.Contains(err.Error(), "the disk is full; nothing of this call was written") {
		t.Errorf("Update on a full disk: %v; want an error saying the disk is full", err)
	}
	got, err := s.Get(bg, "t", "kept")
	if err != nil || len(pooltest.Diff(kept, got)) > 0 {
		t.Errorf("after the failed Update: %v, %v; want the entry as it was", pooltest.Diff(kept, got), err)
	}

	if _, err := db.Exec(`PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(bg, e); err != nil {
		t.Errorf("Create once there is room: %v", err)
	}
}
