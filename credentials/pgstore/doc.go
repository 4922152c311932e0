// Package pgstore implements credentials.Store on PostgreSQL with
// github.com/jackc/pgx/v5, encrypting every secret at rest with
// AES-256-GCM under a credentials.KeyRing. Credentials survive restarts
// and are shared by every replica that uses the same table.
//
//	db, err := pgxpool.New(ctx, url)                   // yours to configure and close
//	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key}) // 32 random bytes, kept outside the database
//	store, err := pgstore.New(db, pgstore.Config{KeyRing: ring, Schema: "valet"})
//	err = store.Migrate(ctx)                           // once per start; idempotent
//
// New takes the pool the host already has and a Config: KeyRing is
// required, and every other field's zero value means its documented
// default. Config.Schema chooses the schema the tables live in, as it
// does for every PostgreSQL backend of valet (memory/pgmemory,
// trigger/rivertrigger); "" is the connection's search_path.
//
// # Tables
//
// Migrate creates, if they do not exist (the schema must exist):
//
//	credentials       tenant_id, service, account_name   PRIMARY KEY, text COLLATE "C"
//	                  key_id                             the id of the key that encrypted the row
//	                  nonce, ciphertext                  bytea: AES-256-GCM, 12-byte random nonce
//	                  revision                           1 on insert, +1 on every Save and Update
//	                  created_at, updated_at             timestamptz
//	credentials_keys  key_id PRIMARY KEY, nonce, check_value, created_at
//
// Config.Schema and Config.Table choose other names (the key table is
// always the credentials table's name with "_keys"). Migrate runs in one transaction
// holding pg_advisory_xact_lock on a hash of the table's name, so
// processes starting together do not race to create the tables.
//
// Names — tenant, service, account — are stored in the clear; only the
// secret is encrypted. They are also the additional data of the
// encryption, each length-prefixed, so a row copied or moved to another
// tenant, service or account fails to decrypt (credentials.ErrDecrypt)
// rather than reveal one tenant's secret to another.
//
// # Keys
//
// Every write uses the ring's primary key. The first time a key id writes
// to the table, the store records a key check for it in credentials_keys
// (a fixed value sealed under that key, credentials.KeyRing.KeyCheck);
// afterwards a ring whose key of that id is other material — a
// misconfigured replica — is refused with credentials.ErrWrongKey naming
// the key id before it writes anything, and its reads say so instead of
// blaming the row. A row under a key id the ring lacks fails with
// credentials.ErrUnknownKey naming the id.
//
// To rotate: add a new key as primary on every replica
// (NewKeyRing("k2", {"k1": old, "k2": new})), call Rotate once, then drop
// the old key. Rotate re-encrypts rows not under the primary in batches of
// Config.RotateBatch (DefaultRotateBatch, 100) rows per transaction, in
// primary-key order, locking only the batch (SELECT ... FOR UPDATE):
// readers never wait, and writers of a row wait at most one batch. Rows it
// cannot decrypt stay as they are and are named in its error. Rotate keeps
// revision and updated_at.
//
// # Concurrency
//
// Save is one upsert (INSERT ... ON CONFLICT DO UPDATE), so concurrent
// Saves of one credential leave exactly one of their values. Update locks
// the row (SELECT ... FOR UPDATE) in a transaction, calls fn, and writes
// with a revision check, so racing token refreshes run one after the
// other and each sees the token the previous one stored. DeleteTenant is
// one DELETE.
//
// # Errors
//
// Errors come back wrapped as "pgstore: <op> (tenant ..., service ...,
// account ...): ...", with the credentials sentinels (ErrNotFound,
// ErrInvalid, ErrUnknownKey, ErrWrongKey, ErrDecrypt) visible to
// errors.Is. A PostgreSQL that is down or a ctx that ends gives an error
// and writes nothing: every write is one statement or one transaction. A
// missing table says to run Migrate. No error holds a secret or key bytes.
//
// Tested on PostgreSQL 15; any version from 12 on should do.
package pgstore
