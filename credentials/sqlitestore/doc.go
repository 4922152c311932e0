// Package sqlitestore implements credentials.Store on an SQLite file,
// through database/sql and the pure-Go driver modernc.org/sqlite (no C
// compiler), encrypting every secret at rest with AES-256-GCM under a
// credentials.KeyRing exactly as credentials/pgstore does: the same
// additional data, the same key checks, the same rotation. It is the
// embedded durable default: credentials survive restarts with no server
// to run.
//
//	import _ "modernc.org/sqlite" // the "sqlite" driver, in your main package
//
//	db, err := sql.Open("sqlite", "file:valet.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
//	db.SetMaxOpenConns(1)                                  // River's advice for SQLite; see below
//	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key}) // 32 random bytes, kept outside the file
//	store, err := sqlitestore.New(db, sqlitestore.Config{KeyRing: ring})
//	err = store.Migrate(ctx)                               // once per start; idempotent
//
// New takes the *sql.DB the host opened (and closes) and a Config:
// KeyRing is required, and every other field's zero value means its
// documented default. The package imports no driver: the program does,
// once, as above.
//
// # Opening the file
//
// Open the file with the parameters above, in modernc.org/sqlite's
// syntax: busy_timeout makes a connection wait up to 5 s for another's
// write lock instead of failing with "database is locked" (Migrate
// refuses a connection without one); journal_mode(WAL) lets readers go
// on while a writer writes (Migrate switches a file in another journal
// mode to WAL, a setting the file keeps); foreign_keys(1) is for the
// tables of valet's other SQLite backends that declare references. Every
// backend of valet can share the one file and the one *sql.DB.
//
// River, whose SQLite driver runs valet's durable triggers, advises
// SetMaxOpenConns(1): SQLite has one writer at a time, and one connection
// queues the writers of the process in Go rather than in SQLite's busy
// loop. The store works on a pool too: every write is a transaction begun
// with BEGIN IMMEDIATE, which takes the write lock first, so a
// transaction that reads and then writes never fails half-way because
// another connection wrote meanwhile, whatever _txlock the DSN asks for.
// Several processes may open the file; they take turns to write.
//
// # Tables
//
// Migrate creates, if they do not exist:
//
//	credentials       tenant_id, service, account_name   PRIMARY KEY (compared byte by byte)
//	                  key_id                             the id of the key that encrypted the row
//	                  nonce, ciphertext                  BLOB: AES-256-GCM, 12-byte random nonce
//	                  revision                           1 on insert, +1 on every Save and Update
//	                  created_at, updated_at             INTEGER microseconds since 1970 UTC
//	credentials_keys  key_id PRIMARY KEY, nonce, check_value, created_at
//
// and records SchemaVersion in the table valet_schema_versions under the
// component "credentials/" + the table's name. Config.Table chooses
// another name (the key table is always its name with "_keys"). Migrate
// runs in one write transaction, so processes starting together migrate
// one after the other; once the file is up to date it writes nothing, so
// a read-only file that is up to date passes. A file whose recorded
// version is newer than SchemaVersion — written by a newer valet — is
// refused with ErrSchemaTooNew, naming both versions, and left as it is.
//
// Names — tenant, service, account — are stored in the clear; only the
// secret is encrypted. They are also the additional data of the
// encryption, each length-prefixed, so a row copied or moved to another
// tenant, service or account fails to decrypt (credentials.ErrDecrypt).
//
// # Keys
//
// Every write uses the ring's primary key. The first write under a key id
// records a key check for it in credentials_keys, in the same transaction
// as the row; afterwards a ring whose key of that id is other material is
// refused with credentials.ErrWrongKey before it writes anything, and its
// reads say so instead of blaming the row. A row under a key id the ring
// lacks fails with credentials.ErrUnknownKey naming the id.
//
// To rotate: add a new key as primary (NewKeyRing("k2", {"k1": old, "k2":
// new})), call Rotate once, then drop the old key. Rotate re-encrypts rows
// not under the primary in write transactions of Config.RotateBatch
// (DefaultRotateBatch, 100) rows, in primary-key order; readers go on,
// and writers wait at most one batch. Rows it cannot decrypt stay as they
// are and are named in its error. Rotate keeps revision and updated_at.
//
// # Concurrency
//
// Save is one upsert, with the key check, in one write transaction, so
// concurrent Saves of one credential leave exactly one of their values.
// Update holds the file's write lock while fn runs, so racing token
// refreshes run one after the other and each sees the token the previous
// one stored; every other write to the file waits meanwhile, so fn should
// be quick. fn must not write to the store: called with the ctx fn was
// given, Save, Delete, Update, DeleteTenant and Rotate fail at once with
// an error wrapping credentials.ErrInvalid (with another ctx they would
// wait for the Update until that ctx ends). fn may read the store: Get
// and List called with fn's ctx read on the Update's connection, so they
// work on one connection (SetMaxOpenConns(1)) too, where a read with
// another ctx would wait for the connection until that ctx ends.
//
// # Errors
//
// Errors come back wrapped as "sqlitestore: <op> (tenant ..., service
// ..., account ...): ...", with the credentials sentinels (ErrNotFound,
// ErrInvalid, ErrUnknownKey, ErrWrongKey, ErrDecrypt) visible to
// errors.Is. SQLite's errors say what to do: a missing table to run
// Migrate, a file that is not an SQLite database, a read-only file or
// directory (or mode=ro), a full disk. Every write is one transaction: a
// call that fails — a full disk, an ended ctx — writes nothing, and
// nothing half-written is read back. No error holds a secret or key bytes.
package sqlitestore
