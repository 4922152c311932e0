package sqlitepool

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/sqlitex"
	"github.com/valetkit/valet/pool"
)

// Defaults of a zero [Config].
const (
	// DefaultTable is the table of pooled entries.
	DefaultTable = "pool_entries"
)

// SchemaVersion is the version of the table this code writes, recorded in
// the file's valet_schema_versions table under "pool/" and the table's
// name. Migrate refuses a file recording a newer one.
const SchemaVersion = 1

// ErrSchemaTooNew is returned by Migrate for a file written by a newer
// version of valet; the error names both versions. It is the same value
// in every SQLite backend of valet.
var ErrSchemaTooNew = sqlitex.ErrSchemaTooNew

// sweepEvery is how often a Create also removes the entries of every
// tenant whose retention has ended; each tenant's own are removed by its
// Creates.
const sweepEvery = time.Minute

// Config configures [New]. The zero value means the documented defaults;
// a zero number means its default and a negative one is refused by New.
type Config struct {
	// Clock is the store's clock: what "now" is for expiry, retention and
	// the times Create and Update set; give it the orchestrator's
	// agent.Config.Clock. Nil: clock.System.
	Clock clock.Clock
	// Logger reports corrupt rows the store removed.
	// Default: slog.Default().
	Logger *slog.Logger
	// MaxPerTenant is how many unexpired entries one tenant may hold;
	// Create past it fails with pool.ErrTenantFull. Negative is an error.
	// Default: pool.DefaultMaxPerTenant (100).
	MaxPerTenant int
	// Retention is how long an entry stays readable after its ExpiresAt;
	// stores on one file and table should share it. Negative is an error.
	// Default: pool.DefaultRetention (an hour).
	Retention time.Duration
	// Table names the table of entries (its indexes are named after it).
	// Stores on the same file and table share their entries.
	// Default: DefaultTable ("pool_entries").
	Table string
}

// withDefaults returns c with its defaults filled in, or an error wrapping
// pool.ErrInvalidConfig naming the field it rejects.
func (c Config) withDefaults() (Config, error) {
	if c.MaxPerTenant < 0 {
		return c, fmt.Errorf("sqlitepool: %w: negative MaxPerTenant %d", pool.ErrInvalidConfig, c.MaxPerTenant)
	}
	if c.Retention < 0 {
		return c, fmt.Errorf("sqlitepool: %w: negative Retention %v", pool.ErrInvalidConfig, c.Retention)
	}
	c.Clock = clock.Or(c.Clock)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxPerTenant = cmp.Or(c.MaxPerTenant, pool.DefaultMaxPerTenant)
	c.Retention = cmp.Or(c.Retention, pool.DefaultRetention)
	c.Table = cmp.Or(c.Table, DefaultTable)
	if err := sqlitex.CheckName(c.Table); err != nil {
		return c, fmt.Errorf("sqlitepool: %w: table name %v", pool.ErrInvalidConfig, err)
	}
	return c, nil
}

// Store is a [pool.Store] on an SQLite file. It is safe for concurrent
// use, also by several processes on one file: every write is one
// transaction, and Take and TakeRevision remove the row they return in
// one statement, so of callers racing for an entry exactly one gets it.
type Store struct {
	db        *sql.DB
	component string
	max       int
	retention time.Duration
	clock     clock.Clock
	log       *slog.Logger
	w         *sqlitex.Writer // queues this store's writes in the process
	q         queries
	lastSweep atomic.Int64 // Unix µs of the last sweep of every tenant
}

var _ pool.Store = (*Store)(nil)

// New returns a Store on db, an SQLite database the caller opened (with
// modernc.org/sqlite, see the package documentation) and closes. The zero
// Config means the defaults. A nil db, a negative setting or a Table
// SQLite cannot name is an error wrapping pool.ErrInvalidConfig. It sends
// nothing to the database; call Migrate once per start before the first
// use.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("sqlitepool: %w: New needs a *sql.DB, got nil", pool.ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		db:        db,
		component: "pool/" + cfg.Table,
		max:       cfg.MaxPerTenant,
		retention: cfg.Retention,
		clock:     cfg.Clock,
		log:       cfg.Logger,
		w:         sqlitex.NewWriter(),
		q:         newQueries(cfg.Table),
	}, nil
}

// queries are the statements of a Store, on its table.
type queries struct {
	migrate                       []string
	sweepTenant, sweepAll         string
	occupancy, insert             string
	update, revision              string
	get, list, take, takeRevision string
	del, drop                     string
}

// An entry's row: its key, its revision, the times the store selects and
// orders by (INTEGER microseconds since 1970 UTC), and the entry as JSON
// (pool.Entry's encoding, which keeps every time to the nanosecond).
// Text is compared byte by byte (SQLite's BINARY collation). A row is
// readable while expires_at > now - retention (?cutoff below).
func newQueries(table string) queries {
	r := strings.NewReplacer(
		"{t}", sqlitex.Quote(table),
		"{tenant_idx}", sqlitex.Quote(table+"_tenant_expires_idx"),
		"{expires_idx}", sqlitex.Quote(table+"_expires_idx"),
	)
	return queries{
		migrate: []string{
			r.Replace(`CREATE TABLE IF NOT EXISTS {t} (
	tenant_id  TEXT NOT NULL,
	id         TEXT NOT NULL,
	revision   INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	expires_at INTEGER NOT NULL,
	entry      TEXT NOT NULL,
	PRIMARY KEY (tenant_id, id)
) WITHOUT ROWID`),
			// The cap counts a tenant's unexpired rows; a Create sweeps
			// the tenant's rows past retention.
			r.Replace(`CREATE INDEX IF NOT EXISTS {tenant_idx} ON {t} (tenant_id, expires_at)`),
			// The sweep of every tenant.
			r.Replace(`CREATE INDEX IF NOT EXISTS {expires_idx} ON {t} (expires_at)`),
		},
		sweepTenant: r.Replace(`DELETE FROM {t} WHERE tenant_id = ?1 AND expires_at <= ?2`),
		sweepAll:    r.Replace(`DELETE FROM {t} WHERE expires_at <= ?1`),
		// Whether the ID is taken, and how many unexpired entries the
		// tenant holds.
		occupancy: r.Replace(`SELECT EXISTS (SELECT 1 FROM {t} WHERE tenant_id = ?1 AND id = ?2),
	(SELECT count(*) FROM {t} WHERE tenant_id = ?1 AND expires_at > ?3)`),
		insert: r.Replace(`INSERT INTO {t} (tenant_id, id, revision, created_at, expires_at, entry)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)`),
		// ?3 the revision read, ?4 the cutoff.
		update: r.Replace(`UPDATE {t} SET revision = revision + 1, created_at = ?5, expires_at = ?6, entry = ?7
WHERE tenant_id = ?1 AND id = ?2 AND revision = ?3 AND expires_at > ?4`),
		revision: r.Replace(`SELECT revision FROM {t} WHERE tenant_id = ?1 AND id = ?2 AND expires_at > ?3`),
		get:      r.Replace(`SELECT revision, entry FROM {t} WHERE tenant_id = ?1 AND id = ?2 AND expires_at > ?3`),
		list: r.Replace(`SELECT id, revision, entry FROM {t} WHERE tenant_id = ?1 AND expires_at > ?2
ORDER BY created_at, id`),
		take:         r.Replace(`DELETE FROM {t} WHERE tenant_id = ?1 AND id = ?2 AND expires_at > ?3 RETURNING revision, entry`),
		takeRevision: r.Replace(`DELETE FROM {t} WHERE tenant_id = ?1 AND id = ?2 AND expires_at > ?3 AND revision = ?4 RETURNING revision, entry`),
		del:          r.Replace(`DELETE FROM {t} WHERE tenant_id = ?1 AND id = ?2 AND expires_at > ?3`),
		// Removes a corrupt row unless it was written since it was read.
		drop: r.Replace(`DELETE FROM {t} WHERE tenant_id = ?1 AND id = ?2 AND revision = ?3`),
	}
}

// Migrate creates the table and its indexes if they do not exist and
// records their version; see the package documentation. It is idempotent
// and safe to run at every start, from several processes at once: they
// migrate one after the other. A file whose table is newer than this code
// is refused with ErrSchemaTooNew, naming both versions, and left as it
// is.
func (s *Store) Migrate(ctx context.Context) error {
	err := sqlitex.Migrate(ctx, s.db, s.component, SchemaVersion, func(q sqlitex.Querier, from int) error {
		for _, stmt := range s.q.migrate {
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

// now returns the store's clock without a monotonic reading, so stored
// times compare and print like times read back.
func (s *Store) now() time.Time { return s.clock.Now().Round(0) }

func micros(t time.Time) int64 { return t.UnixMicro() }

// cutoff is the expires_at (µs) at or before which a row's retention has
// ended at now.
func (s *Store) cutoff(now time.Time) int64 { return micros(now.Add(-s.retention)) }

// Create adds e; see [pool.Store.Create]. It sets e.Revision to 1 and
// e.CreatedAt and e.UpdatedAt to now when they are zero. In one write
// transaction it removes the tenant's entries whose retention has ended,
// checks that the ID is free and counts the tenant's unexpired entries
// against the cap. An entry whose ExpiresAt+Retention has already passed
// is accepted and not stored.
func (s *Store) Create(ctx context.Context, e *pool.Entry) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("sqlitepool: create: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "create", e, err)
	}
	now := s.now()
	v := e.Clone()
	v.Revision = 1
	if v.CreatedAt.IsZero() {
		v.CreatedAt = now
	}
	if v.UpdatedAt.IsZero() {
		v.UpdatedAt = now
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sqlitepool: create (tenant %q, id %q): %w: %v", e.TenantID, e.ID, pool.ErrInvalidEntry, err)
	}
	cutoff := s.cutoff(now)
	sweep := micros(now)-s.lastSweep.Load() >= sweepEvery.Microseconds()
	err = s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		if sweep {
			if _, err := q.ExecContext(ctx, s.q.sweepAll, cutoff); err != nil {
				return err
			}
		} else if _, err := q.ExecContext(ctx, s.q.sweepTenant, e.TenantID, cutoff); err != nil {
			return err
		}
		var exists bool
		var n int
		if err := q.QueryRowContext(ctx, s.q.occupancy, e.TenantID, e.ID, micros(now)).Scan(&exists, &n); err != nil {
			return err
		}
		if exists {
			return pool.ErrExists
		}
		if n >= s.max {
			return fmt.Errorf("%w (the cap is %d unexpired entries)", pool.ErrTenantFull, s.max)
		}
		if micros(v.ExpiresAt) <= cutoff {
			return nil // its retention has ended already: never readable
		}
		_, err := q.ExecContext(ctx, s.q.insert, e.TenantID, e.ID, v.Revision, micros(v.CreatedAt), micros(v.ExpiresAt), data)
		return err
	})
	if err != nil {
		return s.fail(ctx, "create", e, err)
	}
	if sweep {
		s.lastSweep.Store(micros(now))
	}
	e.Revision, e.CreatedAt, e.UpdatedAt = v.Revision, v.CreatedAt, v.UpdatedAt
	return nil
}

// Update replaces the stored entry with e if the revisions match; see
// [pool.Store.Update]. It increments e.Revision and sets e.UpdatedAt to
// now. e.CreatedAt is stored as given and must not be zero.
func (s *Store) Update(ctx context.Context, e *pool.Entry) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("sqlitepool: update: %w", err)
	}
	if e.CreatedAt.IsZero() {
		return fmt.Errorf("sqlitepool: update: %w: zero CreatedAt (entry %q); update the entry Get returned", pool.ErrInvalidEntry, e.ID)
	}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "update", e, err)
	}
	now := s.now()
	v := e.Clone()
	v.Revision++
	v.UpdatedAt = now
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("sqlitepool: update (tenant %q, id %q): %w: %v", e.TenantID, e.ID, pool.ErrInvalidEntry, err)
	}
	cutoff := s.cutoff(now)
	err = s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		res, err := q.ExecContext(ctx, s.q.update, e.TenantID, e.ID, e.Revision, cutoff,
			micros(v.CreatedAt), micros(v.ExpiresAt), data)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var stored int64
		if err := q.QueryRowContext(ctx, s.q.revision, e.TenantID, e.ID, cutoff).Scan(&stored); err != nil {
			return err // sql.ErrNoRows: not found
		}
		return fmt.Errorf("%w: revision %d, stored %d", pool.ErrConflict, e.Revision, stored)
	})
	if err != nil {
		return s.fail(ctx, "update", e, err)
	}
	e.Revision, e.UpdatedAt = v.Revision, v.UpdatedAt
	return nil
}

// Get returns the tenant's entry; see [pool.Store.Get]. A corrupt row is
// removed and reported as pool.ErrCorrupt.
func (s *Store) Get(ctx context.Context, tenantID, id string) (*pool.Entry, error) {
	ref := &pool.Entry{TenantID: tenantID, ID: id}
	if err := ctx.Err(); err != nil {
		return nil, s.fail(ctx, "get", ref, err)
	}
	var rev int64
	var data string
	err := s.db.QueryRowContext(ctx, s.q.get, tenantID, id, s.cutoff(s.now())).Scan(&rev, &data)
	if err != nil {
		return nil, s.fail(ctx, "get", ref, err)
	}
	e, err := decode(tenantID, id, rev, data)
	if err != nil {
		if derr := s.drop(ctx, "get", tenantID, id, rev, err); derr != nil {
			err = errors.Join(err, fmt.Errorf("removing it: %w", derr))
		}
		return nil, s.fail(ctx, "get", ref, err)
	}
	return e, nil
}

// List returns the tenant's entries, oldest CreatedAt first, ties broken
// by ID. Corrupt rows are removed, logged and left out.
func (s *Store) List(ctx context.Context, tenantID string) ([]*pool.Entry, error) {
	ref := &pool.Entry{TenantID: tenantID}
	if err := ctx.Err(); err != nil {
		return nil, s.fail(ctx, "list", ref, err)
	}
	type bad struct {
		id  string
		rev int64
		err error
	}
	var corrupt []bad
	out, err := func() ([]*pool.Entry, error) {
		rows, err := s.db.QueryContext(ctx, s.q.list, tenantID, s.cutoff(s.now()))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []*pool.Entry{}
		for rows.Next() {
			var id, data string
			var rev int64
			if err := rows.Scan(&id, &rev, &data); err != nil {
				return nil, err
			}
			e, err := decode(tenantID, id, rev, data)
			if err != nil {
				corrupt = append(corrupt, bad{id, rev, err})
				continue
			}
			out = append(out, e)
		}
		return out, rows.Err()
	}()
	if err != nil {
		return nil, s.fail(ctx, "list", ref, err)
	}
	// Removed after the rows are closed: on one connection the removal
	// needs the connection the query held.
	for _, b := range corrupt {
		if err := s.drop(ctx, "list", tenantID, b.id, b.rev, b.err); err != nil {
			return nil, s.fail(ctx, "list", ref, fmt.Errorf("removing the corrupt entry %q: %w", b.id, err))
		}
	}
	slices.SortFunc(out, func(a, b *pool.Entry) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Take removes the tenant's entry and returns it, in one DELETE ...
// RETURNING; see [pool.Store.Take]. A corrupt row is removed all the same
// and reported as pool.ErrCorrupt.
func (s *Store) Take(ctx context.Context, tenantID, id string) (*pool.Entry, error) {
	return s.take(ctx, "take", tenantID, id, s.q.take)
}

// TakeRevision removes the tenant's entry and returns it if its stored
// Revision is revision, in one DELETE ... RETURNING that compares the
// revisions; see [pool.Store.TakeRevision]. A corrupt row at that
// revision is removed and reported as pool.ErrCorrupt; at another, it is
// ErrConflict like any other, left for Get or List to remove.
func (s *Store) TakeRevision(ctx context.Context, tenantID, id string, revision int64) (*pool.Entry, error) {
	return s.take(ctx, "take revision", tenantID, id, s.q.takeRevision, revision)
}

// take runs Take's or TakeRevision's statement (extra is the revision of
// TakeRevision) in a write transaction; when it takes nothing, the
// transaction tells a conflict from an entry that is not there.
func (s *Store) take(ctx context.Context, op, tenantID, id, stmt string, extra ...any) (*pool.Entry, error) {
	ref := &pool.Entry{TenantID: tenantID, ID: id}
	if err := ctx.Err(); err != nil {
		return nil, s.fail(ctx, op, ref, err)
	}
	cutoff := s.cutoff(s.now())
	var rev int64
	var data string
	err := s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		err := q.QueryRowContext(ctx, stmt, append([]any{tenantID, id, cutoff}, extra...)...).Scan(&rev, &data)
		if !errors.Is(err, sql.ErrNoRows) || len(extra) == 0 {
			return err
		}
		var stored int64
		if err := q.QueryRowContext(ctx, s.q.revision, tenantID, id, cutoff).Scan(&stored); err != nil {
			return err
		}
		return fmt.Errorf("%w: revision %d, stored %d", pool.ErrConflict, extra[0], stored)
	})
	if err != nil {
		return nil, s.fail(ctx, op, ref, err)
	}
	e, err := decode(tenantID, id, rev, data)
	if err != nil {
		s.log.Warn("sqlitepool: removed a corrupt pool entry", "tenant", tenantID, "id", id, "op", op, "err", err)
		return nil, s.fail(ctx, op, ref, err)
	}
	return e, nil
}

// Delete removes the tenant's entry; see [pool.Store.Delete].
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	ref := &pool.Entry{TenantID: tenantID, ID: id}
	if err := ctx.Err(); err != nil {
		return s.fail(ctx, "delete", ref, err)
	}
	cutoff := s.cutoff(s.now())
	err := s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		res, err := q.ExecContext(ctx, s.q.del, tenantID, id, cutoff)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		return sql.ErrNoRows
	})
	return s.fail(ctx, "delete", ref, err)
}

// drop logs the corrupt row of tenantID and id read at revision rev (its
// fault is cause) and removes it, unless it was written since.
func (s *Store) drop(ctx context.Context, op, tenantID, id string, rev int64, cause error) error {
	s.log.Warn("sqlitepool: removing a corrupt pool entry", "tenant", tenantID, "id", id, "op", op, "err", cause)
	return s.w.Tx(ctx, s.db, func(q sqlitex.Querier) error {
		_, err := q.ExecContext(ctx, s.q.drop, tenantID, id, rev)
		return err
	})
}

// decode turns a stored row into the entry of tenantID and id at revision
// rev, or returns an error wrapping pool.ErrCorrupt.
func decode(tenantID, id string, rev int64, data string) (*pool.Entry, error) {
	var e pool.Entry
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		return nil, fmt.Errorf("%w: %v", pool.ErrCorrupt, err)
	}
	if err := e.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", pool.ErrCorrupt, err)
	}
	if e.TenantID != tenantID || e.ID != id {
		return nil, fmt.Errorf("%w: the row holds entry %q of tenant %q", pool.ErrCorrupt, e.ID, e.TenantID)
	}
	if e.Revision != rev || rev < 1 {
		return nil, fmt.Errorf("%w: the row is at revision %d, its entry at %d", pool.ErrCorrupt, rev, e.Revision)
	}
	return &e, nil
}

// fail is the one place errors get their context (interpretError in the
// house style): sql.ErrNoRows becomes pool.ErrNotFound, SQLite's errors
// say what to do (sqlitex.Explain: run Migrate, not a database,
// read-only, disk full), an ended ctx is always errors.Is-visible, and
// every error names the operation and the entry. e may be nil.
func (s *Store) fail(ctx context.Context, op string, e *pool.Entry, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		err = pool.ErrNotFound
	}
	err = sqlitex.Explain(err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	switch {
	case e == nil:
		return fmt.Errorf("sqlitepool: %s: %w", op, err)
	case e.ID == "":
		return fmt.Errorf("sqlitepool: %s (tenant %q): %w", op, e.TenantID, err)
	}
	return fmt.Errorf("sqlitepool: %s (tenant %q, id %q): %w", op, e.TenantID, e.ID, err)
}
