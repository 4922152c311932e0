package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/internal/sqlitex"
)

// Defaults of a zero [Config].
const (
	// DefaultTable is the table of credentials. Its key checks are in the
	// table of the same name with "_keys" appended.
	DefaultTable = "credentials"
	// DefaultRotateBatch is how many rows Rotate re-encrypts per
	// transaction.
	DefaultRotateBatch = 100
)

// SchemaVersion is the version of the tables this code writes, recorded
// in the file's valet_schema_versions table under "credentials/" and the
// table's name. Migrate refuses a file recording a newer one.
const SchemaVersion = 1

// ErrSchemaTooNew is returned by Migrate for a file written by a newer
// version of valet; the error names both versions. It is the same value
// in every SQLite backend of valet.
var ErrSchemaTooNew = sqlitex.ErrSchemaTooNew

// Config configures [New]. KeyRing is required; the zero value of every
// other field means its documented default.
type Config struct {
	// KeyRing encrypts and decrypts every secret; its primary key seals
	// every write. Required: New refuses a nil KeyRing with an error
	// wrapping credentials.ErrInvalid. No default.
	KeyRing *credentials.KeyRing
	// RotateBatch is how many rows Rotate re-encrypts per transaction.
	// Negative is an error. Default: DefaultRotateBatch (100).
	RotateBatch int
	// Table names the table of credentials; the key checks go in the
	// table of that name with "_keys" appended. Stores on the same file
	// and table share their credentials.
	// Default: DefaultTable ("credentials").
	Table string
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping credentials.ErrInvalid naming the field it rejects.
func (c Config) withDefaults() (Config, error) {
	if c.KeyRing == nil {
		return c, fmt.Errorf("%w: sqlitestore: Config.KeyRing is nil", credentials.ErrInvalid)
	}
	if c.RotateBatch < 0 {
		return c, fmt.Errorf("%w: sqlitestore: negative RotateBatch %d", credentials.ErrInvalid, c.RotateBatch)
	}
	c.RotateBatch = cmp.Or(c.RotateBatch, DefaultRotateBatch)
	c.Table = cmp.Or(c.Table, DefaultTable)
	if err := sqlitex.CheckName(c.Table); err != nil {
		return c, fmt.Errorf("%w: sqlitestore: table name %v", credentials.ErrInvalid, err)
	}
	return c, nil
}

// Store is a credentials.Store on an SQLite file that encrypts every
// secret with AES-256-GCM under a credentials.KeyRing, exactly as
// credentials/pgstore does. It implements credentials.Store,
// credentials.Updater, credentials.TenantDeleter and credentials.Rotator,
// and is safe for concurrent use, also by several processes on one file.
type Store struct {
	db        *sql.DB
	ring      *credentials.KeyRing
	component string
	batch     int
	w         *sqlitex.Writer // queues this store's writes in the process
	q         queries
	verified  sync.Map // key id → struct{}: its key check passed
}

var (
	_ credentials.Store         = (*Store)(nil)
	_ credentials.Updater       = (*Store)(nil)
	_ credentials.TenantDeleter = (*Store)(nil)
	_ credentials.Rotator       = (*Store)(nil)
)

// New returns a Store on db, an SQLite database the caller opened (with
// modernc.org/sqlite, see the package documentation) and closes,
// encrypting with cfg.KeyRing. It sends nothing to the database; call
// Migrate once per start before the first use.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlitestore: New needs a *sql.DB, got nil", credentials.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		db:        db,
		ring:      cfg.KeyRing,
		batch:     cfg.RotateBatch,
		component: "credentials/" + cfg.Table,
		w:         sqlitex.NewWriter(),
		q:         newQueries(sqlitex.Quote(cfg.Table), sqlitex.Quote(cfg.Table+"_keys")),
	}, nil
}

// queries are the statements of a Store, on its tables.
type queries struct {
	createTable, createKeys           string
	upsert, get, list, del, delTenant string
	lockRow, update                   string
	rotateSelect, rotateUpdate        string
	keyGet, keyInsert                 string
}

// Times are INTEGER microseconds since 1970 UTC, PostgreSQL's precision.
// Text is compared byte by byte (SQLite's BINARY collation), as pgstore's
// COLLATE "C".
func newQueries(table, keys string) queries {
	r := strings.NewReplacer("{table}", table, "{keys}", keys)
	return queries{
		createTable: r.Replace(`CREATE TABLE IF NOT EXISTS {table} (
	tenant_id    TEXT NOT NULL,
	service      TEXT NOT NULL,
	account_name TEXT NOT NULL,
	key_id       TEXT NOT NULL,
	nonce        BLOB NOT NULL,
	ciphertext   BLOB NOT NULL,
	revision     INTEGER NOT NULL DEFAULT 1,
	created_at   INTEGER NOT NULL,
	updated_at   INTEGER NOT NULL,
	PRIMARY KEY (tenant_id, service, account_name)
) WITHOUT ROWID`),
		createKeys: r.Replace(`CREATE TABLE IF NOT EXISTS {keys} (
	key_id      TEXT PRIMARY KEY,
	nonce       BLOB NOT NULL,
	check_value BLOB NOT NULL,
	created_at  INTEGER NOT NULL
)`),
		upsert: r.Replace(`INSERT INTO {table} AS c (tenant_id, service, account_name, key_id, nonce, ciphertext, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)
ON CONFLICT (tenant_id, service, account_name) DO UPDATE
SET key_id = excluded.key_id, nonce = excluded.nonce, ciphertext = excluded.ciphertext,
	revision = c.revision + 1, updated_at = max(c.updated_at, excluded.updated_at)`),
		get:       r.Replace(`SELECT key_id, nonce, ciphertext FROM {table} WHERE tenant_id = ?1 AND service = ?2 AND account_name = ?3`),
		list:      r.Replace(`SELECT service, account_name, created_at, updated_at FROM {table} WHERE tenant_id = ?1 AND (?2 = '' OR service = ?2) ORDER BY service, account_name`),
		del:       r.Replace(`DELETE FROM {table} WHERE tenant_id = ?1 AND service = ?2 AND account_name = ?3`),
		delTenant: r.Replace(`DELETE FROM {table} WHERE tenant_id = ?1`),
		lockRow:   r.Replace(`SELECT key_id, nonce, ciphertext, revision FROM {table} WHERE tenant_id = ?1 AND service = ?2 AND account_name = ?3`),
		update: r.Replace(`UPDATE {table} SET key_id = ?4, nonce = ?5, ciphertext = ?6, revision = revision + 1, updated_at = max(updated_at, ?8)
WHERE tenant_id = ?1 AND service = ?2 AND account_name = ?3 AND revision = ?7`),
		rotateSelect: r.Replace(`SELECT tenant_id, service, account_name, key_id, nonce, ciphertext FROM {table}
WHERE key_id <> ?1 AND (tenant_id, service, account_name) > (?2, ?3, ?4)
ORDER BY tenant_id, service, account_name LIMIT ?5`),
		rotateUpdate: r.Replace(`UPDATE {table} SET key_id = ?4, nonce = ?5, ciphertext = ?6
WHERE tenant_id = ?1 AND service = ?2 AND account_name = ?3 AND key_id = ?7`),
		keyGet:    r.Replace(`SELECT nonce, check_value FROM {keys} WHERE key_id = ?1`),
		keyInsert: r.Replace(`INSERT INTO {keys} (key_id, nonce, check_value, created_at) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (key_id) DO NOTHING`),
	}
}

// Migrate creates the tables if they do not exist and records their
// version; see the package documentation. It is idempotent and safe to
// run at every start, from several processes at once: they migrate one
// after the other. A file whose tables are newer than this code is
// refused with ErrSchemaTooNew, naming both versions, and left as it is.
func (s *Store) Migrate(ctx context.Context) error {
	err := sqlitex.Migrate(ctx, s.db, s.component, SchemaVersion, func(q sqlitex.Querier, from int) error {
		for _, stmt := range []string{s.q.createTable, s.q.createKeys} {
			if _, err := q.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail(ctx, "migrate", nil, err)
	}
	return nil
}

// CheckKeys compares every key of the ring with the key check the file
// holds for its id, and returns credentials.ErrWrongKey, naming the key
// id, when one differs from the key that wrote under that id: call it at
// start to refuse a lost or mistyped key at once rather than at the first
// Get of each credential. A key id the file has no key check for (never
// written with) passes. It reads no credential and writes nothing.
func (s *Store) CheckKeys(ctx context.Context) error {
	for _, id := range s.ring.KeyIDs() {
		checked, err := s.checkKey(ctx, s.db, id, false)
		if err != nil {
			return s.fail(ctx, "checking the keys", nil, err)
		}
		if checked {
			s.remember(id)
		}
	}
	return nil
}

// name is one credential, its account normalised.
type name struct{ tenant, service, account string }

func (n *name) String() string {
	return fmt.Sprintf("tenant %q, service %q, account %q", n.tenant, n.service, n.account)
}

func now() int64 { return time.Now().UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us) }

// Save encrypts creds under the ring's primary key and stores them,
// replacing what was there (its revision goes up by one), in one write
// transaction that also records the primary key's key check the first
// time that key writes. See credentials.Store.Save. A primary key whose
// material differs from the key that first wrote under its id fails with
// credentials.ErrWrongKey and writes nothing.
func (s *Store) Save(ctx context.Context, tenantID, service, account string, creds any) error {
	account, err := credentials.Normalize(tenantID, service, account)
	if err != nil {
		return fmt.Errorf("sqlitestore: save: %w", err)
	}
	n := &name{tenantID, service, account}
	sec, err := credentials.Encode(creds)
	if err != nil {
		return fmt.Errorf("sqlitestore: save (%s): %w", n, err)
	}
	if err := s.notInUpdate(ctx); err != nil {
		return s.fail(ctx, "save", n, err)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "save", n, err)
	}
	sealed, err := s.ring.Seal(n.tenant, n.service, n.account, sec)
	if err != nil {
		return s.fail(ctx, "save", n, err)
	}
	err = s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		if _, err := s.checkKey(ctx, q, sealed.KeyID, true); err != nil {
			return err
		}
		_, err := q.ExecContext(ctx, s.q.upsert, n.tenant, n.service, n.account, sealed.KeyID, sealed.Nonce, sealed.Ciphertext, now())
		return err
	})
	if err != nil {
		return s.fail(ctx, "save", n, err)
	}
	s.remember(sealed.KeyID)
	return nil
}

// Get reads and decrypts the credential; see credentials.Store.Get.
func (s *Store) Get(ctx context.Context, tenantID, service, account string) (credentials.Secret, error) {
	account, err := credentials.Normalize(tenantID, service, account)
	if err != nil {
		return credentials.Secret{}, fmt.Errorf("sqlitestore: get: %w", err)
	}
	n := &name{tenantID, service, account}
	if err := ctx.Err(); err != nil {
		return credentials.Secret{}, s.fail(ctx, "get", n, err)
	}
	var sealed credentials.Sealed
	q := s.reader(ctx)
	err = q.QueryRowContext(ctx, s.q.get, n.tenant, n.service, n.account).Scan(&sealed.KeyID, &sealed.Nonce, &sealed.Ciphertext)
	if err != nil {
		return credentials.Secret{}, s.fail(ctx, "get", n, err)
	}
	sec, err := s.open(ctx, q, n, sealed)
	if err != nil {
		return credentials.Secret{}, s.fail(ctx, "get", n, err)
	}
	return sec, nil
}

// open decrypts a row. When the row does not authenticate, the key check
// tells wrong key material (credentials.ErrWrongKey) from a row that was
// moved or altered (credentials.ErrDecrypt).
func (s *Store) open(ctx context.Context, q sqlitex.Querier, n *name, sealed credentials.Sealed) (credentials.Secret, error) {
	sec, err := s.ring.Open(n.tenant, n.service, n.account, sealed)
	if err == nil || !errors.Is(err, credentials.ErrDecrypt) {
		return sec, err
	}
	switch checked, kerr := s.checkKey(ctx, q, sealed.KeyID, false); {
	case errors.Is(kerr, credentials.ErrWrongKey):
		return credentials.Secret{}, kerr
	case kerr == nil && checked:
		return credentials.Secret{}, fmt.Errorf("%w (the key check of %q passes: the row was moved or altered)", err, sealed.KeyID)
	}
	return credentials.Secret{}, err
}

func (s *Store) isVerified(id string) bool { _, ok := s.verified.Load(id); return ok }

// checkKey compares the ring's key id with the key check stored for it:
// true when they match, credentials.ErrWrongKey when they do not. A key id
// with no key check yet gets one when register is set (the first write
// under a key, inside its write transaction), and is let pass otherwise
// (false, nil). It remembers nothing: a key check read or inserted in a
// write transaction is in the file only once that commits, so the caller
// calls s.remember after the commit (a rolled-back registration must not
// let later writes skip the check that another process's key of the same
// id would fail).
func (s *Store) checkKey(ctx context.Context, q sqlitex.Querier, id string, register bool) (bool, error) {
	if s.isVerified(id) {
		return true, nil
	}
	c := credentials.Sealed{KeyID: id}
	err := q.QueryRowContext(ctx, s.q.keyGet, id).Scan(&c.Nonce, &c.Ciphertext)
	if errors.Is(err, sql.ErrNoRows) {
		if !register {
			return false, nil
		}
		fresh, err := s.ring.KeyCheck(id)
		if err != nil {
			return false, err
		}
		// In the write transaction no other process can have registered
		// it meanwhile: what is inserted is what is stored.
		if _, err := q.ExecContext(ctx, s.q.keyInsert, id, fresh.Nonce, fresh.Ciphertext, now()); err != nil {
			return false, err
		}
		c = fresh
	} else if err != nil {
		return false, err
	}
	if err := s.ring.VerifyKeyCheck(c); err != nil {
		if errors.Is(err, credentials.ErrWrongKey) && register {
			return false, fmt.Errorf("%w; nothing was written", err)
		}
		return false, err
	}
	return true, nil
}

// remember records that the key check of id passed and is in the file
// (its write transaction committed), so later writes skip reading it.
func (s *Store) remember(id string) { s.verified.Store(id, struct{}{}) }

// List returns metadata only, sorted by service and account; see
// credentials.Store.List. It reads no ciphertext and needs no key.
func (s *Store) List(ctx context.Context, tenantID, service string) ([]credentials.Info, error) {
	if err := credentials.CheckList(tenantID, service); err != nil {
		return nil, fmt.Errorf("sqlitestore: list: %w", err)
	}
	op := fmt.Sprintf("list (tenant %q, service %q)", tenantID, service)
	if err := ctx.Err(); err != nil {
		return nil, s.fail(ctx, op, nil, err)
	}
	rows, err := s.reader(ctx).QueryContext(ctx, s.q.list, tenantID, service)
	if err != nil {
		return nil, s.fail(ctx, op, nil, err)
	}
	defer rows.Close()
	var out []credentials.Info
	for rows.Next() {
		in := credentials.Info{TenantID: tenantID}
		var created, updated int64
		if err := rows.Scan(&in.Service, &in.Account, &created, &updated); err != nil {
			return nil, s.fail(ctx, op, nil, err)
		}
		in.CreatedAt, in.UpdatedAt = fromMicros(created), fromMicros(updated)
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, nil, err)
	}
	return out, nil
}

// Delete removes the credential; see credentials.Store.Delete.
func (s *Store) Delete(ctx context.Context, tenantID, service, account string) error {
	account, err := credentials.Normalize(tenantID, service, account)
	if err != nil {
		return fmt.Errorf("sqlitestore: delete: %w", err)
	}
	n := &name{tenantID, service, account}
	if err := s.notInUpdate(ctx); err != nil {
		return s.fail(ctx, "delete", n, err)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "delete", n, err)
	}
	err = s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		_, err := q.ExecContext(ctx, s.q.del, n.tenant, n.service, n.account)
		return err
	})
	if err != nil {
		return s.fail(ctx, "delete", n, err)
	}
	return nil
}

// DeleteTenant removes every credential of the tenant in one statement;
// see credentials.TenantDeleter.
func (s *Store) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	if err := credentials.CheckList(tenantID, ""); err != nil {
		return 0, fmt.Errorf("sqlitestore: delete tenant: %w", err)
	}
	op := fmt.Sprintf("delete tenant %q", tenantID)
	if err := s.notInUpdate(ctx); err != nil {
		return 0, s.fail(ctx, op, nil, err)
	}
	if err := ctx.Err(); err != nil {
		return 0, s.fail(ctx, op, nil, err)
	}
	var n int64
	err := s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		res, err := q.ExecContext(ctx, s.q.delTenant, tenantID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, s.fail(ctx, op, nil, err)
	}
	return int(n), nil
}

// fail is the one place errors get their context (interpretError in the
// house style): sql.ErrNoRows becomes credentials.ErrNotFound, SQLite's
// errors say what to do (sqlitex.Explain: run Migrate, not a database,
// read-only, disk full), and an ended ctx is always errors.Is-visible. n
// may be nil.
func (s *Store) fail(ctx context.Context, op string, n *name, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		err = credentials.ErrNotFound
	}
	err = sqlitex.Explain(err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if n == nil {
		return fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	return fmt.Errorf("sqlitestore: %s (%s): %w", op, n, err)
}
