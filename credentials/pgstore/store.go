package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/internal/rotation"
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

// maxIdentLen is PostgreSQL's longest identifier (NAMEDATALEN - 1).
const maxIdentLen = 63

// rollbackTimeout bounds a rollback after the caller's ctx ended.
const rollbackTimeout = 5 * time.Second

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
	// Schema holds the tables; it must exist. Stores in different
	// schemas of one database keep apart. Default: "", the connection's
	// search_path.
	Schema string
	// Table names the table of credentials; the key checks go in the
	// table of that name with "_keys" appended. Stores that share a
	// schema and table share their credentials.
	// Default: DefaultTable ("credentials").
	Table string
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping credentials.ErrInvalid naming the field it rejects.
func (c Config) withDefaults() (Config, error) {
	if c.KeyRing == nil {
		return c, fmt.Errorf("%w: pgstore: Config.KeyRing is nil", credentials.ErrInvalid)
	}
	if c.RotateBatch < 0 {
		return c, fmt.Errorf("%w: pgstore: negative RotateBatch %d", credentials.ErrInvalid, c.RotateBatch)
	}
	c.RotateBatch = cmp.Or(c.RotateBatch, DefaultRotateBatch)
	c.Table = cmp.Or(c.Table, DefaultTable)
	if err := checkIdent("table", c.Table+"_keys"); err != nil {
		return c, err
	}
	if err := checkIdent("schema", c.Schema); err != nil {
		return c, err
	}
	return c, nil
}

// Store is a credentials.Store on PostgreSQL that encrypts every secret
// with AES-256-GCM under a credentials.KeyRing. It implements
// credentials.Store, credentials.Updater, credentials.TenantDeleter and
// credentials.Rotator, and is safe for concurrent use, also by several
// processes on one table.
type Store struct {
	db   *pgxpool.Pool
	ring *credentials.KeyRing
	// table and keys are the quoted, qualified table names; lockKey is
	// Migrate's advisory lock.
	table, keys string
	lockKey     int64
	batch       int
	q           queries
	verified    sync.Map // key id → struct{}: its key check passed
}

var (
	_ credentials.Store         = (*Store)(nil)
	_ credentials.Updater       = (*Store)(nil)
	_ credentials.TenantDeleter = (*Store)(nil)
	_ credentials.Rotator       = (*Store)(nil)
)

// New returns a Store on db, a pool the caller configured and closes,
// encrypting with cfg.KeyRing. It sends nothing to PostgreSQL; call
// Migrate once (from any number of processes) before the first use.
func New(db *pgxpool.Pool, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: pgstore: New needs a *pgxpool.Pool, got nil", credentials.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, ring: cfg.KeyRing, batch: cfg.RotateBatch}
	ident := func(name string) string {
		if cfg.Schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{cfg.Schema, name}.Sanitize()
	}
	s.table, s.keys = ident(cfg.Table), ident(cfg.Table+"_keys")
	h := fnv.New64a()
	h.Write([]byte("valet/credentials/pgstore migrate " + s.table))
	s.lockKey = int64(h.Sum64())
	s.q = newQueries(s.table, s.keys)
	return s, nil
}

// checkIdent checks a name New gives PostgreSQL ("" is no schema).
func checkIdent(what, name string) error {
	switch {
	case name == "_keys":
		return fmt.Errorf("%w: pgstore: empty %s name", credentials.ErrInvalid, what)
	case len(name) > maxIdentLen:
		return fmt.Errorf("%w: pgstore: %s name %q is longer than PostgreSQL's %d bytes", credentials.ErrInvalid, what, name, maxIdentLen)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: pgstore: %s name holds a NUL byte", credentials.ErrInvalid, what)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: pgstore: %s name is not valid UTF-8", credentials.ErrInvalid, what)
	}
	return nil
}

// queries are the statements of a Store, on its tables.
type queries struct {
	createTable, createKeys           string
	upsert, get, list, del, delTenant string
	lockRow, update                   string
	rotateSelect, rotateUpdate        string
	keyGet, keyInsert                 string
}

func newQueries(table, keys string) queries {
	r := strings.NewReplacer("{table}", table, "{keys}", keys)
	return queries{
		createTable: r.Replace(`CREATE TABLE IF NOT EXISTS {table} (
	tenant_id    text COLLATE "C" NOT NULL,
	service      text COLLATE "C" NOT NULL,
	account_name text COLLATE "C" NOT NULL,
	key_id       text NOT NULL,
	nonce        bytea NOT NULL,
	ciphertext   bytea NOT NULL,
	revision     bigint NOT NULL DEFAULT 1,
	created_at   timestamptz NOT NULL DEFAULT now(),
	updated_at   timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (tenant_id, service, account_name)
)`),
		createKeys: r.Replace(`CREATE TABLE IF NOT EXISTS {keys} (
	key_id      text COLLATE "C" PRIMARY KEY,
	nonce       bytea NOT NULL,
	check_value bytea NOT NULL,
	created_at  timestamptz NOT NULL DEFAULT now()
)`),
		upsert: r.Replace(`INSERT INTO {table} AS c (tenant_id, service, account_name, key_id, nonce, ciphertext)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, service, account_name) DO UPDATE
SET key_id = EXCLUDED.key_id, nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext,
	revision = c.revision + 1, updated_at = greatest(c.updated_at, now())`),
		get:       r.Replace(`SELECT key_id, nonce, ciphertext FROM {table} WHERE tenant_id = $1 AND service = $2 AND account_name = $3`),
		list:      r.Replace(`SELECT service, account_name, created_at, updated_at FROM {table} WHERE tenant_id = $1 AND ($2 = '' OR service = $2) ORDER BY service, account_name`),
		del:       r.Replace(`DELETE FROM {table} WHERE tenant_id = $1 AND service = $2 AND account_name = $3`),
		delTenant: r.Replace(`DELETE FROM {table} WHERE tenant_id = $1`),
		lockRow:   r.Replace(`SELECT key_id, nonce, ciphertext, revision FROM {table} WHERE tenant_id = $1 AND service = $2 AND account_name = $3 FOR UPDATE`),
		update: r.Replace(`UPDATE {table} SET key_id = $4, nonce = $5, ciphertext = $6, revision = revision + 1, updated_at = greatest(updated_at, now())
WHERE tenant_id = $1 AND service = $2 AND account_name = $3 AND revision = $7`),
		rotateSelect: r.Replace(`SELECT tenant_id, service, account_name, key_id, nonce, ciphertext FROM {table}
WHERE key_id <> $1 AND (tenant_id, service, account_name) > ($2, $3, $4)
ORDER BY tenant_id, service, account_name LIMIT $5 FOR UPDATE`),
		rotateUpdate: r.Replace(`UPDATE {table} SET key_id = $4, nonce = $5, ciphertext = $6
WHERE tenant_id = $1 AND service = $2 AND account_name = $3 AND key_id = $7`),
		keyGet:    r.Replace(`SELECT nonce, check_value FROM {keys} WHERE key_id = $1`),
		keyInsert: r.Replace(`INSERT INTO {keys} (key_id, nonce, check_value) VALUES ($1, $2, $3) ON CONFLICT (key_id) DO NOTHING`),
	}
}

// Migrate creates the tables if they do not exist. It is idempotent and
// safe to run from several processes at once: it holds a transaction-level
// advisory lock on the table's name while it runs.
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return s.fail(ctx, "migrate", nil, err)
	}
	defer rollback(ctx, tx)
	for _, q := range []string{`SELECT pg_advisory_xact_lock($1)`, s.q.createTable, s.q.createKeys} {
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{s.lockKey}
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			return s.fail(ctx, "migrate", nil, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail(ctx, "migrate", nil, err)
	}
	return nil
}

// name is one credential, its account normalised.
type name struct{ tenant, service, account string }

func (n *name) String() string {
	return fmt.Sprintf("tenant %q, service %q, account %q", n.tenant, n.service, n.account)
}

// Save encrypts creds under the ring's primary key and stores them,
// replacing what was there (its revision goes up by one). See
// credentials.Store.Save. A primary key whose material differs from the
// key that first wrote under its id fails with credentials.ErrWrongKey
// and writes nothing.
func (s *Store) Save(ctx context.Context, tenantID, service, account string, creds any) error {
	account, err := credentials.Normalize(tenantID, service, account)
	if err != nil {
		return fmt.Errorf("pgstore: save: %w", err)
	}
	n := &name{tenantID, service, account}
	sec, err := credentials.Encode(creds)
	if err != nil {
		return fmt.Errorf("pgstore: save (%s): %w", n, err)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "save", n, err)
	}
	sealed, err := s.seal(ctx, n, sec)
	if err != nil {
		return s.fail(ctx, "save", n, err)
	}
	if _, err := s.db.Exec(ctx, s.q.upsert, n.tenant, n.service, n.account, sealed.KeyID, sealed.Nonce, sealed.Ciphertext); err != nil {
		return s.fail(ctx, "save", n, err)
	}
	return nil
}

// seal checks the primary key against its key check, then encrypts.
func (s *Store) seal(ctx context.Context, n *name, sec credentials.Secret) (credentials.Sealed, error) {
	if err := s.checkKey(ctx, s.db, s.ring.PrimaryID(), true); err != nil {
		return credentials.Sealed{}, err
	}
	return s.ring.Seal(n.tenant, n.service, n.account, sec)
}

// Get reads and decrypts the credential; see credentials.Store.Get.
func (s *Store) Get(ctx context.Context, tenantID, service, account string) (credentials.Secret, error) {
	account, err := credentials.Normalize(tenantID, service, account)
	if err != nil {
		return credentials.Secret{}, fmt.Errorf("pgstore: get: %w", err)
	}
	n := &name{tenantID, service, account}
	if err := ctx.Err(); err != nil {
		return credentials.Secret{}, s.fail(ctx, "get", n, err)
	}
	var sealed credentials.Sealed
	err = s.db.QueryRow(ctx, s.q.get, n.tenant, n.service, n.account).Scan(&sealed.KeyID, &sealed.Nonce, &sealed.Ciphertext)
	if err != nil {
		return credentials.Secret{}, s.fail(ctx, "get", n, err)
	}
	sec, err := s.open(ctx, s.db, n, sealed)
	if err != nil {
		return credentials.Secret{}, s.fail(ctx, "get", n, err)
	}
	return sec, nil
}

// open decrypts a row. When the row does not authenticate, the key check
// tells wrong key material (credentials.ErrWrongKey) from a row that was
// moved or altered (credentials.ErrDecrypt).
func (s *Store) open(ctx context.Context, q querier, n *name, sealed credentials.Sealed) (credentials.Secret, error) {
	sec, err := s.ring.Open(n.tenant, n.service, n.account, sealed)
	if err == nil || !errors.Is(err, credentials.ErrDecrypt) {
		return sec, err
	}
	switch kerr := s.checkKey(ctx, q, sealed.KeyID, false); {
	case errors.Is(kerr, credentials.ErrWrongKey):
		return credentials.Secret{}, kerr
	case kerr == nil && s.isVerified(sealed.KeyID):
		return credentials.Secret{}, fmt.Errorf("%w (the key check of %q passes: the row was moved or altered)", err, sealed.KeyID)
	}
	return credentials.Secret{}, err
}

// querier is a pool or a transaction: inside a transaction the key check
// is read on its connection rather than waiting for another.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (s *Store) isVerified(id string) bool { _, ok := s.verified.Load(id); return ok }

// checkKey compares the ring's key id with the key check stored for it:
// nil when they match (remembered), credentials.ErrWrongKey when they do
// not. A key id with no key check yet gets one when register is set (the
// first write under a key), and is let pass otherwise.
func (s *Store) checkKey(ctx context.Context, q querier, id string, register bool) error {
	if s.isVerified(id) {
		return nil
	}
	c := credentials.Sealed{KeyID: id}
	err := q.QueryRow(ctx, s.q.keyGet, id).Scan(&c.Nonce, &c.Ciphertext)
	if errors.Is(err, pgx.ErrNoRows) {
		if !register {
			return nil
		}
		fresh, err := s.ring.KeyCheck(id)
		if err != nil {
			return err
		}
		if _, err := q.Exec(ctx, s.q.keyInsert, id, fresh.Nonce, fresh.Ciphertext); err != nil {
			return err
		}
		// Another process may have registered the id first: compare with
		// what is stored, not with what this one tried to insert.
		err = q.QueryRow(ctx, s.q.keyGet, id).Scan(&c.Nonce, &c.Ciphertext)
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := s.ring.VerifyKeyCheck(c); err != nil {
		if errors.Is(err, credentials.ErrWrongKey) && register {
			return fmt.Errorf("%w; nothing was written", err)
		}
		return err
	}
	s.verified.Store(id, struct{}{})
	return nil
}

// List returns metadata only, sorted by service and account; see
// credentials.Store.List. It reads no ciphertext and needs no key.
func (s *Store) List(ctx context.Context, tenantID, service string) ([]credentials.Info, error) {
	if err := credentials.CheckList(tenantID, service); err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	op := fmt.Sprintf("list (tenant %q, service %q)", tenantID, service)
	if err := ctx.Err(); err != nil {
		return nil, s.fail(ctx, op, nil, err)
	}
	rows, err := s.db.Query(ctx, s.q.list, tenantID, service)
	if err != nil {
		return nil, s.fail(ctx, op, nil, err)
	}
	var out []credentials.Info
	for rows.Next() {
		in := credentials.Info{TenantID: tenantID}
		if err := rows.Scan(&in.Service, &in.Account, &in.CreatedAt, &in.UpdatedAt); err != nil {
			rows.Close()
			return nil, s.fail(ctx, op, nil, err)
		}
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
		return fmt.Errorf("pgstore: delete: %w", err)
	}
	n := &name{tenantID, service, account}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "delete", n, err)
	}
	if _, err := s.db.Exec(ctx, s.q.del, n.tenant, n.service, n.account); err != nil {
		return s.fail(ctx, "delete", n, err)
	}
	return nil
}

// DeleteTenant removes every credential of the tenant in one statement;
// see credentials.TenantDeleter.
func (s *Store) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	if err := credentials.CheckList(tenantID, ""); err != nil {
		return 0, fmt.Errorf("pgstore: delete tenant: %w", err)
	}
	op := fmt.Sprintf("delete tenant %q", tenantID)
	if err := ctx.Err(); err != nil {
		return 0, s.fail(ctx, op, nil, err)
	}
	tag, err := s.db.Exec(ctx, s.q.delTenant, tenantID)
	if err != nil {
		return 0, s.fail(ctx, op, nil, err)
	}
	return int(tag.RowsAffected()), nil
}

// Update changes the credential with fn in one transaction: it locks the
// row (SELECT ... FOR UPDATE), decrypts it, calls fn, encrypts what fn
// returns under the primary key and writes it with a revision check. See
// credentials.Updater. Updates and Saves of the credential wait while fn
// runs; reads do not. A row that does not decrypt fails before fn is
// called, and nothing is written.
func (s *Store) Update(ctx context.Context, tenantID, service, account string, fn func(ctx context.Context, old credentials.Secret) (any, error)) error {
	account, err := credentials.Normalize(tenantID, service, account)
	if err != nil {
		return fmt.Errorf("pgstore: update: %w", err)
	}
	n := &name{tenantID, service, account}
	if fn == nil {
		return fmt.Errorf("pgstore: update (%s): %w: Update needs a func", n, credentials.ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "update", n, err)
	}
	if err := s.checkKey(ctx, s.db, s.ring.PrimaryID(), true); err != nil {
		return s.fail(ctx, "update", n, err)
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return s.fail(ctx, "update", n, err)
	}
	defer rollback(ctx, tx)
	var old credentials.Sealed
	var rev int64
	err = tx.QueryRow(ctx, s.q.lockRow, n.tenant, n.service, n.account).Scan(&old.KeyID, &old.Nonce, &old.Ciphertext, &rev)
	if err != nil {
		return s.fail(ctx, "update", n, err)
	}
	sec, err := s.open(ctx, tx, n, old)
	if err != nil {
		return s.fail(ctx, "update", n, err)
	}
	v, err := fn(ctx, sec)
	if err != nil {
		return err
	}
	next, err := credentials.Encode(v)
	if err != nil {
		return fmt.Errorf("pgstore: update (%s): %w", n, err)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "update", n, err)
	}
	sealed, err := s.ring.Seal(n.tenant, n.service, n.account, next)
	if err != nil {
		return s.fail(ctx, "update", n, err)
	}
	tag, err := tx.Exec(ctx, s.q.update, n.tenant, n.service, n.account, sealed.KeyID, sealed.Nonce, sealed.Ciphertext, rev)
	if err != nil {
		return s.fail(ctx, "update", n, err)
	}
	if tag.RowsAffected() != 1 {
		// The row is locked, so this means it was changed outside the
		// rules (a revision set by hand).
		return s.fail(ctx, "update", n, credentials.ErrConflict)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail(ctx, "update", n, err)
	}
	return nil
}

// Rotate re-encrypts every row that is not under the key ring's primary
// key, in transactions of the batch size (Config.RotateBatch), and returns how
// many rows it re-encrypted. See the package documentation.
//
// It walks the table in primary-key order, locking each batch with SELECT
// ... FOR UPDATE, so it never blocks readers, waits only for writers of
// the rows in the batch, and shares the work with a Rotate running
// elsewhere. A row it cannot decrypt (a key id the ring lacks, wrong key
// material, a row moved or altered) stays as it is; Rotate goes on with
// the rest and returns an error naming such rows and their key ids. The
// revision and updated_at of a row do not change.
func (s *Store) Rotate(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, s.fail(ctx, "rotate", nil, err)
	}
	primary := s.ring.PrimaryID()
	if err := s.checkKey(ctx, s.db, primary, true); err != nil {
		return 0, s.fail(ctx, "rotate", nil, err)
	}
	total, failed, err := rotation.Walk(func(after name) (int, name, bool, []error, error) {
		return s.rotateBatch(ctx, primary, after)
	})
	if err != nil {
		return total, s.fail(ctx, "rotate", nil, err)
	}
	return total, failed.Err("pgstore: rotate", total)
}

// rotateBatch re-encrypts up to a batch of rows after the name after in
// one transaction. It returns how many it re-encrypted, the last name it
// looked at, whether the batch was full (more may follow), and the rows
// it could not decrypt.
func (s *Store) rotateBatch(ctx context.Context, primary string, after name) (int, name, bool, []error, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, after, false, nil, err
	}
	defer rollback(ctx, tx)
	rows, err := tx.Query(ctx, s.q.rotateSelect, primary, after.tenant, after.service, after.account, s.batch)
	if err != nil {
		return 0, after, false, nil, err
	}
	type row struct {
		n      name
		sealed credentials.Sealed
	}
	var batch []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.n.tenant, &r.n.service, &r.n.account, &r.sealed.KeyID, &r.sealed.Nonce, &r.sealed.Ciphertext); err != nil {
			rows.Close()
			return 0, after, false, nil, err
		}
		batch = append(batch, r)
	}
	if err := rows.Err(); err != nil {
		return 0, after, false, nil, err
	}
	if len(batch) == 0 {
		return 0, after, false, nil, nil
	}
	var bad []error
	b := &pgx.Batch{}
	for _, r := range batch {
		sec, err := s.open(ctx, tx, &r.n, r.sealed)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		sealed, err := s.ring.Seal(r.n.tenant, r.n.service, r.n.account, sec)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		b.Queue(s.q.rotateUpdate, r.n.tenant, r.n.service, r.n.account, sealed.KeyID, sealed.Nonce, sealed.Ciphertext, r.sealed.KeyID)
	}
	n := 0
	if b.Len() > 0 {
		res := tx.SendBatch(ctx, b)
		for range b.Len() {
			tag, err := res.Exec()
			if err != nil {
				res.Close()
				return 0, after, false, bad, err
			}
			n += int(tag.RowsAffected())
		}
		if err := res.Close(); err != nil {
			return 0, after, false, bad, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, after, false, bad, err
	}
	return n, batch[len(batch)-1].n, len(batch) == s.batch, bad, nil
}

func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx) // after Commit, pgx.ErrTxClosed
}

// fail is the one place errors get their context (interpretError in
// the house style): pgx.ErrNoRows becomes credentials.ErrNotFound, a
// missing table says to run Migrate, and an ended ctx is always
// errors.Is-visible. n may be nil.
func (s *Store) fail(ctx context.Context, op string, n *name, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		err = credentials.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		err = fmt.Errorf("%w (run Migrate first)", err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if n == nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	return fmt.Errorf("pgstore: %s (%s): %w", op, n, err)
}
