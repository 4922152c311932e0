package sqlitedb_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/valetkit/valet/sqlitedb"
)

// TestDSNRefusesAPathWithANul: a path holding a NUL byte names no file
// (the kernel refuses it, as os.Open does), and SQLite's URI parser would
// stop at the NUL, opening the file named by what precedes it: "a\x00b.db"
// would open (and create) "a". The DSN of such a path must fail to open,
// saying why, and create nothing — even with "&mode=ro" appended.
func TestDSNRefusesAPathWithANul(t *testing.T) {
	dir := t.TempDir()
	for _, suffix := range []string{"", "&mode=ro"} {
		db, err := sql.Open("sqlite", sqlitedb.DSN(filepath.Join(dir, "a\x00b.db"))+suffix)
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec("CREATE TABLE t (x)")
		db.Close()
		if err == nil || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("%q: opening a path with a NUL byte: %v, want an error naming the NUL", suffix, err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a file was created for a path with a NUL byte: %v", entries)
	}
}
