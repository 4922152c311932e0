// Package sqlitedb gives every durable store of valet from one SQLite
// file, in one call: the embedded default for an assistant that runs as
// one process — a personal assistant on a home server, a bot in one
// container, a desktop app, a laptop — with no server beside it.
//
//	import _ "modernc.org/sqlite" // the "sqlite" driver (pure Go), in your main package
//
//	db, err := sql.Open("sqlite", sqlitedb.DSN("valet.db"))
//	db.SetMaxOpenConns(1)                                          // River's advice; see below
//	stores, err := sqlitedb.Open(ctx, db, sqlitedb.Config{KeyRing: ring}) // at every start
//	o, err := agent.NewOrchestrator(agent.Config{
//		LLM:         model,
//		Credentials: stores.Credentials, // credentials/sqlitestore
//		Memory:      stores.Memory,      // memory/sqlitememory
//		Pool:        stores.Pool,        // pool/sqlitepool: waiting Agent-Tools and approvals
//	})
//	engine, err := trigger.New(trigger.Config{Store: stores.Triggers, ...}) // trigger/sqlitetrigger, River on the file
//
// Open takes the *sql.DB the program opened, as every backend of valet
// takes its user's client, and closes nothing: close db after the stores'
// last use. It builds each store on db and runs its Migrate, so the
// tables exist and are of this version of valet; run it at every start.
// Config holds one Config per store (zero values are their defaults) and
// the KeyRing that encrypts credentials, which is required and must be
// kept outside the file. The package imports no SQLite driver: the
// program imports modernc.org/sqlite once, as above.
//
// # Opening the file
//
// DSN(path) writes the path as modernc.org/sqlite wants it with the
// parameters the stores need (DSNParams), so none can be forgotten:
//
//   - _pragma=busy_timeout(5000): a connection waits up to 5 s for
//     another's write lock instead of failing at once with "database is
//     locked". Open refuses a connection without a busy timeout.
//   - _pragma=journal_mode(WAL): readers go on while one connection
//     writes. WAL is a setting of the file; Open switches a file in another
//     journal mode to it.
//   - _pragma=foreign_keys(1): SQLite enforces references only on a
//     connection that asks, and the tables of valet's SQLite backends that
//     declare references rely on it.
//
// The file's directory must be writable: WAL keeps two files beside the
// database (path-wal and path-shm). Copy all three, or copy the database
// while no process has it open, to back it up.
//
// River, on whose SQLite driver valet's durable triggers run, advises one
// connection (db.SetMaxOpenConns(1)): SQLite has one writer at a time,
// and a single connection queues the process's writers in Go rather than
// in SQLite's busy loop. The stores also work on a pool of connections —
// every write is a transaction begun with BEGIN IMMEDIATE — but then a
// long Credentials.Update holds the write lock while the other writers
// spin. On one connection, never call a store from inside
// Credentials.Update's function (the connection is Update's meanwhile).
//
// # What a user sees on bad input
//
//   - A file that is not an SQLite database: Open fails with "sqlitedb:
//     credentials: sqlitestore: migrate: file is not a database (26) (the
//     file is not an SQLite database)" and leaves the file as it was.
//   - A read-only file or directory: the process cannot write (file
//     permissions, a read-only mount, or "&mode=ro" after DSN). Open
//     succeeds on a file already migrated and reads work; every write
//     fails with "attempt to write a readonly database (8) (the database
//     is read-only (the file's or its directory's permissions, or opened
//     with mode=ro))". A file never migrated is refused by Open with the
//     same words. Root ignores file permissions, so a test or a container
//     running as root sees this only with mode=ro or a read-only mount.
//   - A file a newer valet wrote: Open fails with ErrSchemaTooNew ("the
//     file's schema of credentials/credentials is version 9, newer than
//     version 1, the newest this version of valet knows: upgrade valet, or
//     open another file"; *VersionError holds the three) and changes
//     nothing.
//   - A full disk (or a file at PRAGMA max_page_count): the write fails
//     with "database or disk is full (13) (the disk is full; nothing of
//     this call was written)"; each write is one transaction, so nothing half
//     written is read back, and the next write works once there is room.
//   - A process killed mid-write: SQLite's journal rolls the unfinished
//     transaction back when the file is next opened; what a store
//     committed is there, what it had not is not (a conversation's turn is
//     appended in one transaction, so history holds whole turns).
//
// # Moving to PostgreSQL
//
// Stores.CopyTo copies what the file holds into any other stores through
// their public methods — every credential (decrypted with this file's
// ring and encrypted again by the target, which may use another key),
// every conversation's history from its newest summary on, every
// long-term item with its kind, provenance, origin and time, and which
// item supersedes which:
//
//	creds, err := pgstore.New(pg, pgstore.Config{KeyRing: ring}) // then Migrate
//	mem, err := pgmemory.New(pg, pgmemory.Config{})             // then Migrate
//	n, err := stores.CopyTo(ctx, sqlitedb.Target{Credentials: creds, Memory: mem})
//
// Run it once, with the assistant stopped, into empty stores. Vectors are
// not copied; a target with an Embedder embeds the texts again. Pending
// approvals (Stores.Pool) are not copied: let them be answered or expire
// first. Tasks and their runs (Stores.Triggers) are not copied either.
//
// # One process
//
// Several processes may open the file and take turns to write; that is
// what lets a second copy of a program start while the first is still
// stopping. SQLite is not a server: it is for one machine and, in
// practice, one process. When an assistant needs replicas, move it to
// the PostgreSQL and Redis backends (credentials/pgstore,
// memory/pgmemory, pool/redispool, trigger/rivertrigger); valet's README
// says how ("When to move").
package sqlitedb
