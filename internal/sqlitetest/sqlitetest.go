// Package sqlitetest opens SQLite files for valet's tests, with
// modernc.org/sqlite and the parameters valet's SQLite backends document
// (sqlitex.DSNParams). It is for valet's tests only.
package sqlitetest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/valetkit/valet/internal/sqlitex"
)

// DSN returns the data source name of the file at path, opened with
// sqlitex.DSNParams and extra (more parameters, "" for none).
func DSN(path, extra string) string {
	dsn := "file:" + path + "?" + sqlitex.DSNParams
	if extra != "" {
		dsn += "&" + extra
	}
	return dsn
}

// Open opens a new file in t's temporary directory with at most conns
// connections (0: no limit); it is closed when t ends. conns 1 is River's
// advice for SQLite; more test the backends' own locking.
func Open(t testing.TB, conns int) *sql.DB {
	t.Helper()
	return OpenPath(t, filepath.Join(t.TempDir(), "valet.db"), conns)
}

// OpenPath opens the file at path as Open does.
func OpenPath(t testing.TB, path string, conns int) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", DSN(path, ""))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(conns)
	t.Cleanup(func() { db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("opening %s: %v", path, err)
	}
	return db
}
