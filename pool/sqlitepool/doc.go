// Package sqlitepool implements pool.Store on an SQLite file, through
// database/sql and the pure-Go driver modernc.org/sqlite (no C compiler):
// the Agent-Tools waiting for the user's input or approval survive a
// restart of the process, in one file, with no server to run.
//
//	import _ "modernc.org/sqlite" // the "sqlite" driver, in your main package
//
//	db, err := sql.Open("sqlite", "file:valet.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
//	db.SetMaxOpenConns(1)                                 // River's advice for SQLite
//	store, err := sqlitepool.New(db, sqlitepool.Config{}) // zero fields: the defaults
//	err = store.Migrate(ctx)                              // once per start; idempotent
//	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Agents: reg, Pool: store})
//
// New takes the *sql.DB the host opened (and closes) and a Config whose
// zero value means the documented defaults; a nil db, a negative setting
// or a table name SQLite cannot use is refused with an error wrapping
// pool.ErrInvalidConfig. The package imports no driver: the program does,
// once, as above.
//
// # Opening the file
//
// Open the file as credentials/sqlitestore documents under "Opening the
// file": busy_timeout (Migrate refuses a connection without one), WAL
// (Migrate switches the file to it), foreign_keys; every SQLite backend of
// valet can share the one file and the one *sql.DB. The store works on one
// connection, River's advice, and on a pool: every write is a transaction
// begun with BEGIN IMMEDIATE, queued in the process behind the store's
// other writes.
//
// Each write is a commit, which with SQLite's default synchronous(FULL)
// waits for the disk; with WAL, _pragma=synchronous(NORMAL) in the DSN
// makes commits wait for it only at checkpoints: a crash of the process
// still loses nothing committed, a power loss may undo the last commits.
// BenchmarkParkAndTake measures both.
//
// # The lock of a conversation
//
// The package has no pool.Locker: SQLite is for one process, and one
// process serialises a conversation's messages itself. Leave
// agent.Config.Locker nil (the orchestrator then serialises them within
// the process) or pass pool.NewMemoryLocker(). Several processes may open
// one file, and share its entries: Take and TakeRevision stay atomic
// across them, so an approval decided in two processes at once runs once;
// but two processes handling messages of one conversation at the same
// time are not serialised. For replicas, use pool/redispool.
//
// # Tables
//
// Migrate creates, if they do not exist, in one write transaction:
//
//	pool_entries  tenant_id, id   PRIMARY KEY (compared byte by byte)
//	              revision        1 on Create, +1 on every Update
//	              created_at      INTEGER microseconds since 1970 UTC (List's order)
//	              expires_at      INTEGER microseconds since 1970 UTC
//	              entry           the pool.Entry as JSON (times to the nanosecond)
//
// with indexes on (tenant_id, expires_at) — a tenant's cap and its sweep —
// and on expires_at. It records SchemaVersion in valet_schema_versions
// under "pool/" and the table's name; a file recording a newer version,
// written by a newer valet, is refused with ErrSchemaTooNew, naming both
// versions, and left as it is. Once the file is up to date Migrate writes
// nothing. Config.Table chooses another name (the indexes are named after
// it); stores on the same file and table share their entries, so tenants
// and IDs are kept apart by the key, whatever they contain (':', braces,
// a NUL byte in an ID). The entry is kept as JSON, so an ID that is not
// valid UTF-8 could not be read back; pool.Entry.Check, which Create and
// Update call, refuses it with pool.ErrInvalidEntry, as it does for every
// store.
//
// # Atomicity and expiry
//
// Create, Update, Take, TakeRevision and Delete are each one write
// transaction. Create removes the tenant's entries whose retention has
// ended (every tenant's, once a minute), checks that the ID is free and
// counts the tenant's unexpired entries against Config.MaxPerTenant;
// Update is one UPDATE on the revision read; Take is one DELETE ...
// RETURNING, and TakeRevision the same with the revision in its WHERE,
// so of callers racing for one entry, in this process or another on the
// file, exactly one gets it. An entry is readable until ExpiresAt +
// Config.Retention; past that it is never returned, and the next Create
// removes it. "Now" is Config.Clock.
//
// A row that does not decode as an entry of its key and revision is
// corrupt: Get, Take and TakeRevision (at its revision) remove it and
// return an error wrapping pool.ErrCorrupt; List removes it, logs a
// warning with the tenant and ID, and returns the rest.
//
// # Errors
//
// Errors come back as "sqlitepool: <op> (tenant ..., id ...): ...", with
// the pool's sentinels and ctx.Err() visible to errors.Is. SQLite's
// errors say what to do: a missing table to run Migrate, a file that is
// not an SQLite database, a read-only file or directory (or mode=ro), a
// full disk. A call that fails writes nothing.
package sqlitepool
