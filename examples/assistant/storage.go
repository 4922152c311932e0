package main

// Where the assistant keeps what outlives one message: the tenants'
// credentials, each conversation's history and the facts learned about the
// user. Without -postgres all of it lives in the process and is lost at
// exit; with -postgres URL one PostgreSQL pool serves both the credential
// store and the memory provider, so a restarted bot still has them.

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// storage is what openStorage opened.
type storage struct {
	Credentials credentials.Store
	// Memory keeps the conversations' history and the facts learned
	// (agent.Config.Memory). Nil: the orchestrator's default, a bounded
	// in-memory provider.
	Memory memory.Provider
	// Close releases the PostgreSQL pool, if there is one.
	Close func()
}

// openStorage returns the credential store and the memory provider: in
// memory, or both on the PostgreSQL database of -postgres through one pool.
// It prints where each is kept.
func openStorage(ctx context.Context, w io.Writer, opts options) (*storage, error) {
	if opts.Postgres == "" {
		fmt.Fprintln(w, "credentials: in memory (lost at exit; -postgres URL keeps them)")
		fmt.Fprintln(w, "history and memory: in memory (lost at exit; -postgres URL keeps them)")
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
