package main

// Where the assistant keeps what outlives one message: the tenants'
// credentials, each conversation's history and the facts learned about the
// user. The interactive mode keeps them in one SQLite file by default
// (-db PATH chooses it), through sqlitedb.Open; with -postgres URL one
// PostgreSQL pool serves both the credential store and the memory
// provider. Either way a restarted bot still has them. The scripted demo
// keeps them in memory, so that every run plays the same conversation.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the "sqlite" driver (pure Go)

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/sqlitedb"
)

// storage is what openStorage opened.
type storage struct {
	Credentials credentials.Store
	// Memory keeps the conversations' history and the facts learned
	// (agent.Config.Memory). Nil: the orchestrator's default, a bounded
	// in-memory provider.
	Memory memory.Provider
	// Pool keeps the Agent-Tools waiting for input or approval
	// (agent.Config.Pool). Nil: the orchestrator's in-memory pool.
	Pool pool.Store
	// Close releases the PostgreSQL pool or the SQLite file, if there is
	// one.
	Close func()
}

// openStorage returns the credential store and the memory provider: in
// memory, or both on the PostgreSQL database of -postgres through one pool.
// It prints where each is kept.
func openStorage(ctx context.Context, w io.Writer, opts options) (*storage, error) {
	if opts.Postgres != "" && opts.DB != "" {
		return nil, fmt.Errorf("-postgres and -db name two places to keep the same things: choose one")
	}
	if opts.DB != "" && opts.DB != memoryDB {
		return openFile(ctx, w, opts.DB)
	}
	if opts.Postgres == "" {
		fmt.Fprintln(w, "credentials: in memory (lost at exit; -db PATH or -postgres URL keeps them)")
		fmt.Fprintln(w, "history and memory: in memory (lost at exit; -db PATH or -postgres URL keeps them)")
		return &storage{Credentials: credentials.NewMemory(), Close: func() {}}, nil
	}

	// The key first: without it nothing should touch the database.
	ring, err := keyRingFromEnv()
	if err != nil {
		return nil, err
	}
	db, err := pgxpool.New(ctx, opts.Postgres)
	if err != nil {
		return nil, fmt.Errorf("-postgres: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	if err := db.Ping(ctx); err != nil {
		return nil, fmt.Errorf("-postgres: cannot reach PostgreSQL: %w", err)
	}
	store, err := postgresCredentials(ctx, db, ring)
	if err != nil {
		return nil, err
	}
	// The tables go to the URL's search_path, like the credentials table.
	mem, err := pgmemory.New(db, pgmemory.Config{})
	if err != nil {
		return nil, err
	}
	if err := mem.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("-postgres: creating the history and memory tables: %w", err)
	}

	cfg := db.Config().ConnConfig // printed without the password
	where := fmt.Sprintf("PostgreSQL %s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
	fmt.Fprintf(w, "credentials: %s, encrypted with key %q from %s\n", where, credentialsKeyID, EnvCredentialsKey)
	fmt.Fprintf(w, "history and memory: %s\n", where)
	ok = true
	return &storage{Credentials: store, Memory: mem, Close: db.Close}, nil
}

// memoryDB, given to -db, keeps everything in memory, as the scripted
// demo does: "-i -db :memory:" chats without remembering.
const memoryDB = ":memory:"

// defaultDBFile is the SQLite file of -i without -db or -postgres, under
// the user's configuration directory (os.UserConfigDir), or in the
// working directory when there is none.
func defaultDBFile() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "valet-assistant.db"
	}
	return filepath.Join(dir, "valet-assistant", "assistant.db")
}

// openFile keeps credentials, history and facts in the SQLite file at
// path, created with its directory if need be: one *sql.DB, every store
// from it through sqlitedb.Open. The credentials' key comes from
// EnvCredentialsKey, or from the key file beside the database
// (keyRingForFile); it is never written into the database.
func openFile(ctx context.Context, w io.Writer, path string) (*storage, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	db, err := sql.Open("sqlite", sqlitedb.DSN(path))
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	db.SetMaxOpenConns(1) // River's advice for SQLite
	ok := false
	defer func() {
		if !ok {
			db.Close()
		}
	}()
	// An existing file that is not a database is refused before a key
	// file is created beside it.
	if _, err := os.Stat(path); err == nil {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
			return nil, fmt.Errorf("-db %s: not an SQLite database valet can read (choose another file with -db): %w", path, err)
		}
	}
	ring, from, err := keyRingForFile(path)
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	stores, err := sqlitedb.Open(ctx, db, sqlitedb.Config{KeyRing: ring})
	if err != nil {
		if errors.Is(err, credentials.ErrWrongKey) {
			if from == keyPath(path)+keyCreatedNote {
				// A key made now for a file another key wrote: remove
				// it, so that putting the lost key file back works.
				os.Remove(keyPath(path))
				from = keyPath(path) + " (a new key: the one that wrote the file is missing)"
			}
			return nil, fmt.Errorf("-db %s: its credentials were encrypted with another key than the one from %s: restore that key file or set %s to that key: %w", path, from, EnvCredentialsKey, err)
		}
		return nil, fmt.Errorf("-db %s: %w", path, err)
	}
	ok = true
	fmt.Fprintf(w, "credentials: SQLite file %s, encrypted with key %q from %s\n", path, credentialsKeyID, from)
	fmt.Fprintf(w, "history and memory: SQLite file %s\n", path)
	fmt.Fprintf(w, "waiting tools and approvals: SQLite file %s\n", path)
	return &storage{
		Credentials: stores.Credentials,
		Memory:      stores.Memory,
		Pool:        stores.Pool,
		Close:       func() { db.Close() },
	}, nil
}
