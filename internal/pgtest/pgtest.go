// Package pgtest gives valet's PostgreSQL tests a database and a schema of
// their own. It is for valet's tests only.
//
// The database is the one VALET_TEST_POSTGRES names; without it a test is
// skipped with a message naming the variable. Each test works in a schema
// of its own, dropped when it ends, so tests run in parallel and leave
// nothing behind.
package pgtest

import (
	"context"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvVar names the variable holding the test database's URL.
const EnvVar = "VALET_TEST_POSTGRES"

// URL returns the test database's URL, or skips t when EnvVar is not set.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvVar)
	if url == "" {
		t.Skip(EnvVar + " not set; set it to a PostgreSQL URL such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run the PostgreSQL tests")
	}
	return url
}

// DB connects to the test database (or skips t); the pool closes when t
// and its subtests end.
func DB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL(t))
	if err != nil {
		t.Fatalf("%s: %v", EnvVar, err)
	}
	cfg.MaxConns = 16
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", EnvVar, err)
	}
	t.Cleanup(db.Close)
	if err := db.Ping(context.Background()); err != nil {
		t.Fatalf("%s: %v", EnvVar, err)
	}
	return db
}

// Schema creates a schema of t's own in db and returns its name; it is
// dropped, with everything in it, when t ends.
func Schema(t testing.TB, db *pgxpool.Pool) string {
	t.Helper()
	schema := "valettest_" + strings.ToLower(rand.Text()[:12])
	if _, err := db.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// PoolIn returns a pool on the test database whose connections work in
// schema (their search_path), for code that names its tables without a
// schema; it closes when t ends.
func PoolIn(t testing.TB, schema string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(URL(t))
	if err != nil {
		t.Fatalf("%s: %v", EnvVar, err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = maxConns
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("connecting to %s: %v", EnvVar, err)
	}
	t.Cleanup(db.Close)
	return db
}
