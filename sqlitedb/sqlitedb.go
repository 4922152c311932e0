package sqlitedb

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/sqlitestore"
	"github.com/valetkit/valet/internal/sqlitex"
	"github.com/valetkit/valet/memory/sqlitememory"
	"github.com/valetkit/valet/pool/sqlitepool"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// DSNParams are the parameters DSN adds to a path, in modernc.org/sqlite's
// syntax: a busy timeout of 5 s, the WAL journal and foreign keys. See the
// package documentation.
const DSNParams = sqlitex.DSNParams

// ErrInvalid is returned by Open for a nil *sql.DB or a Config it cannot
// use (no KeyRing, or two different ones).
var ErrInvalid = errors.New("sqlitedb: invalid")

// ErrSchemaTooNew is returned by Open for a file written by a newer
// version of valet; the error names the component and both versions
// (errors.As with *VersionError). It is the same value as
// sqlitestore.ErrSchemaTooNew and sqlitememory.ErrSchemaTooNew.
var ErrSchemaTooNew = sqlitex.ErrSchemaTooNew

// VersionError is ErrSchemaTooNew with the component and its versions.
type VersionError = sqlitex.VersionError

// Config configures Open. KeyRing is required; the zero value of every
// other field means the defaults of the store it configures.
type Config struct {
	// Credentials configures the credential store (its table name and
	// rotation batch). Its KeyRing may be left nil: KeyRing below is
	// used. Default: sqlitestore's defaults.
	Credentials sqlitestore.Config
	// KeyRing encrypts the credentials' secrets. Keep its keys outside
	// the database file: whoever has the file and the key has every
	// secret. Required; no default.
	KeyRing *credentials.KeyRing
	// Memory configures the memory provider (table prefix, history and
	// item caps, an Embedder for hybrid recall). Default: sqlitememory's
	// defaults.
	Memory sqlitememory.Config
	// Pool configures the pool of waiting Agent-Tools and approvals
	// (table, per-tenant cap, retention, clock). Default: sqlitepool's
	// defaults.
	Pool sqlitepool.Config
	// Triggers configures the trigger store and River's work on the file
	// (queue, workers, timeouts, notices). Default: sqlitetrigger's
	// defaults.
	Triggers sqlitetrigger.Config
}

// Stores are the stores of one SQLite file, each on the *sql.DB given to
// Open. Wire them into an orchestrator:
//
//	agent.Config{Credentials: s.Credentials, Memory: s.Memory, Pool: s.Pool, ...}
type Stores struct {
	// Credentials keeps the tenants' credentials, encrypted with
	// Config.KeyRing (credentials.Store, Updater, TenantDeleter, Rotator).
	Credentials *sqlitestore.Store
	// Memory keeps each conversation's history and the long-term items
	// (memory.Provider).
	Memory *sqlitememory.Provider
	// Pool keeps the Agent-Tools waiting for the user's input or
	// approval (pool.Store), so pending approvals survive a restart. It
	// has no pool.Locker: leave agent.Config.Locker nil, and the
	// orchestrator serialises each conversation's messages in the
	// process.
	Pool *sqlitepool.Store
	// Triggers keeps the scheduled, event and condition tasks and their
	// runs, and dispatches the runs through River on the file
	// (trigger.Store and trigger.Dispatcher): give it to trigger.New as
	// trigger.Config.Store. One process per file dispatches; see
	// trigger/sqlitetrigger.
	Triggers *sqlitetrigger.Store

	db                  *sql.DB
	credTable, memTable string // the credentials table, the memory tables' prefix
}

// Open returns every store of valet on db, an SQLite database the caller
// opened with modernc.org/sqlite (driver "sqlite", best with DSN) and
// closes after the stores' last use, and brings their tables up to date
// (each store's Migrate, in one write transaction each). It is safe to
// call at every start and from several processes at once.
//
// Open fails, leaving the file as it was, on a file that is not an SQLite
// database, a connection without a busy timeout, a read-only file that
// lacks the tables, a file a newer valet wrote (ErrSchemaTooNew,
// naming the component and both versions), and a KeyRing with other key
// material under a key id than the key that wrote the file's credentials
// (credentials.ErrWrongKey, naming the key id; see
// sqlitestore.Store.CheckKeys). Its errors say which store
// failed and what to do.
func Open(ctx context.Context, db *sql.DB, cfg Config) (*Stores, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: a nil *sql.DB", ErrInvalid)
	}
	cc := cfg.Credentials
	switch {
	case cfg.KeyRing == nil && cc.KeyRing == nil:
		return nil, fmt.Errorf("%w: Config.KeyRing is required (the key that encrypts credentials; keep it outside the file)", ErrInvalid)
	case cfg.KeyRing != nil && cc.KeyRing != nil && cfg.KeyRing != cc.KeyRing:
		return nil, fmt.Errorf("%w: Config.KeyRing and Config.Credentials.KeyRing are two rings; set one", ErrInvalid)
	case cc.KeyRing == nil:
		cc.KeyRing = cfg.KeyRing
	}
	creds, err := sqlitestore.New(db, cc)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: credentials: %w", err)
	}
	mem, err := sqlitememory.New(db, cfg.Memory)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: memory: %w", err)
	}
	pl, err := sqlitepool.New(db, cfg.Pool)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: pool: %w", err)
	}
	tr, err := sqlitetrigger.New(db, cfg.Triggers)
	if err != nil {
		return nil, fmt.Errorf("sqlitedb: triggers: %w", err)
	}
	s := &Stores{
		Credentials: creds, Memory: mem, Pool: pl, Triggers: tr, db: db,
		credTable: cmp.Or(cc.Table, sqlitestore.DefaultTable),
		memTable:  cmp.Or(cfg.Memory.TablePrefix, sqlitememory.DefaultTablePrefix),
	}
	for _, m := range []struct {
		name string
		m    interface{ Migrate(context.Context) error }
	}{
		{"credentials", creds},
		{"memory", mem},
		{"pool", pl},
		{"triggers", tr},
	} {
		if err := m.m.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("sqlitedb: %s: %w", m.name, err)
		}
	}
	if err := creds.CheckKeys(ctx); err != nil {
		return nil, fmt.Errorf("sqlitedb: credentials: %w", err)
	}
	return s, nil
}

// DSN returns the data source name that opens the SQLite file at path
// with the parameters valet's stores need (DSNParams):
//
//	db, err := sql.Open("sqlite", sqlitedb.DSN("valet.db"))
//
// The path is written as an SQLite URI ("file:" and the path), with the
// characters that would end or change it there — '%', '?' and '#' —
// escaped, so any file name opens that file (an absolute path gets an
// empty authority, "file:///..."). Append more parameters with
// "&", such as "&mode=ro" to open the file read-only. A path holding a
// NUL byte names no file: its DSN fails to open ("no such vfs", naming
// the NUL) and creates nothing.
func DSN(path string) string {
	prefix := "file:"
	if strings.HasPrefix(path, "/") {
		prefix = "file://" // an empty authority: "//" in path stays path
	}
	dsn := prefix + escapePath(path) + "?" + DSNParams
	if strings.ContainsRune(path, 0) {
		// SQLite's URI parser stops the path at a NUL (even one escaped
		// as %00), which would open the file named by what precedes it.
		// A path with a NUL names no file: a VFS that does not exist
		// makes the open fail, saying why (unless a later "vfs=" is
		// appended, which replaces it).
		dsn += "&vfs=" + nulRefused
	}
	return dsn
}

// nulRefused is the VFS DSN names for a path holding a NUL byte; SQLite
// refuses it with "no such vfs: " and this name.
const nulRefused = "valet-refuses-a-path-holding-a-NUL-byte"

// escapePath escapes what SQLite's URI parser reads as other than the
// path: '%' starts an escape, '?' the query, '#' the fragment.
func escapePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}
