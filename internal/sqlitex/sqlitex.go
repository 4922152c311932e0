// Package sqlitex is what valet's SQLite backends share: the connection
// settings they need (Check), write transactions that take SQLite's write
// lock at their start (WriteTx), the schema-version table that lets a
// newer file be refused (Migrate), identifier quoting and the mapping of
// SQLite's errors onto words a user can act on. It is for valet's own
// packages: users meet its sentinels through the backends' re-exports.
//
// It imports no SQLite driver: the backends take the *sql.DB their user
// opened with modernc.org/sqlite (driver name "sqlite").
package sqlitex

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// DSNParams are the parameters valet's SQLite backends ask the user to
// open the file with, in modernc.org/sqlite's syntax:
//
//	db, err := sql.Open("sqlite", "file:valet.db?"+sqlitex.DSNParams)
//
// busy_timeout makes a connection wait for another's write lock instead
// of failing at once; journal_mode WAL lets readers go on while one
// connection writes; foreign_keys enforces the references later slices'
// tables (pool, triggers) declare.
const DSNParams = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)"

// VersionsTable is the table recording each component's schema version.
const VersionsTable = "valet_schema_versions"

// rollbackTimeout bounds a rollback after the caller's ctx ended.
const rollbackTimeout = 5 * time.Second

// ErrSchemaTooNew is returned by Migrate for a file whose schema of the
// component was written by a newer version of valet than the running one;
// the error is a *VersionError naming both versions. Nothing was changed.
var ErrSchemaTooNew = errors.New("sqlite: the file's schema is newer than this version of valet knows")

// ErrNoBusyTimeout is returned by Check for a connection without a busy
// timeout: two connections (or two processes) writing to the file at once
// would fail with "database is locked" instead of waiting their turn.
var ErrNoBusyTimeout = errors.New("sqlite: the connection has no busy timeout (open the file with _pragma=busy_timeout(5000))")

// VersionError is ErrSchemaTooNew with its versions.
type VersionError struct {
	Component string // what the versions are of, such as "credentials/credentials"
	File      int    // the version the file records
	Code      int    // the newest version this code knows
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("the file's schema of %s is version %d, newer than version %d, the newest this version of valet knows: upgrade valet, or open another file",
		e.Component, e.File, e.Code)
}

// Unwrap makes errors.Is(err, ErrSchemaTooNew) true.
func (e *VersionError) Unwrap() error { return ErrSchemaTooNew }

// Quote returns name as an SQLite identifier in double quotes.
func Quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// CheckName reports why name cannot name an SQLite table or index, or nil:
// empty, a NUL byte, not UTF-8, or SQLite's reserved "sqlite_" prefix.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("is empty")
	case strings.IndexByte(name, 0) >= 0:
		return errors.New("holds a NUL byte")
	case !utf8.ValidString(name):
		return errors.New("is not valid UTF-8")
	case len(name) >= 7 && strings.EqualFold(name[:7], "sqlite_"):
		return fmt.Errorf("%q starts with sqlite_, which SQLite keeps for itself", name)
	}
	return nil
}

// Querier is what WriteTx's fn gets: the connection holding the write
// transaction.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// WriteTx runs fn in a transaction begun with BEGIN IMMEDIATE on one
// connection of db, and commits it when fn returns nil. IMMEDIATE takes
// the file's write lock first (waiting up to the busy timeout for another
// writer), so a transaction that reads and then writes is never refused
// half-way because another connection wrote meanwhile, whatever _txlock
// the user opened the file with. When fn fails, ctx ends or COMMIT fails,
// everything fn wrote is rolled back; a connection whose rollback fails
// is discarded rather than returned to the pool with a transaction open.
func WriteTx(ctx context.Context, db *sql.DB, fn func(q Querier) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if _, rerr := conn.ExecContext(rctx, "ROLLBACK"); rerr != nil && inTx(rctx, conn) {
			// Never hand a connection with an open transaction back.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if err := fn(conn); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return err
	}
	committed = true
	return nil
}

// inTx reports whether conn may still be in a transaction: a COMMIT or
// ROLLBACK outside one fails, so a failed ROLLBACK after SQLite already
// rolled back (a full disk, an interrupted statement) is not a problem.
func inTx(ctx context.Context, conn *sql.Conn) bool {
	// BEGIN succeeds only outside a transaction; undo it at once.
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return true
	}
	_, err := conn.ExecContext(ctx, "ROLLBACK")
	return err != nil
}

// Check reads the settings of one connection of db that valet's backends
// need: a busy timeout (ErrNoBusyTimeout without one). journal_mode is the
// file's, set by Migrate; foreign_keys is asked for by DSNParams for the
// tables that declare references.
func Check(ctx context.Context, db *sql.DB) error {
	var ms int64
	if err := db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err != nil {
		return err
	}
	if ms <= 0 {
		return ErrNoBusyTimeout
	}
	return nil
}

// Migrate brings component's tables in db to version code. It reads the
// version the file records (0 for none); equal, it returns at once without
// writing, so a read-only file that is up to date passes; newer than
// code, it returns a *VersionError; older, it calls up(q, from) in one
// write transaction and records code there, so that two processes
// migrating at once run one after the other and the second finds the
// work done. up is given the version the file had, 0 for a new file.
// Before that it checks db (Check) and switches a file in rollback-journal
// mode to WAL, which is a setting of the file. It starts again on an
// SQLITE_BUSY that SQLite returned without waiting (RetryBusy), as when
// several processes open a new file at once.
func Migrate(ctx context.Context, db *sql.DB, component string, code int, up func(q Querier, from int) error) error {
	return RetryBusy(ctx, func() error { return migrate(ctx, db, component, code, up) })
}

func migrate(ctx context.Context, db *sql.DB, component string, code int, up func(q Querier, from int) error) error {
	if err := Check(ctx, db); err != nil {
		return err
	}
	v, err := readVersion(ctx, db, component)
	if err != nil {
		return err
	}
	if v > code {
		return &VersionError{Component: component, File: v, Code: code}
	}
	if v == code {
		return nil
	}
	if err := useWAL(ctx, db); err != nil {
		return err
	}
	return WriteTx(ctx, db, func(q Querier) error {
		if _, err := q.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+Quote(VersionsTable)+` (
	component TEXT PRIMARY KEY,
	version   INTEGER NOT NULL
)`); err != nil {
			return err
		}
		v, err := readVersion(ctx, q, component)
		if err != nil {
			return err
		}
		switch {
		case v > code:
			return &VersionError{Component: component, File: v, Code: code}
		case v == code:
			return nil // another process migrated meanwhile
		}
		if err := up(q, v); err != nil {
			return err
		}
		_, err = q.ExecContext(ctx, `INSERT INTO `+Quote(VersionsTable)+` (component, version) VALUES (?, ?)
ON CONFLICT (component) DO UPDATE SET version = excluded.version`, component, code)
		return err
	})
}

// readVersion returns the version the file records for component, 0 when
// it records none (or has no versions table yet).
func readVersion(ctx context.Context, q Querier, component string) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?`, VersionsTable).Scan(&n)
	if err != nil || n == 0 {
		return 0, err
	}
	var v int
	err = q.QueryRowContext(ctx, `SELECT version FROM `+Quote(VersionsTable)+` WHERE component = ?`, component).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// useWAL switches a file in a rollback-journal mode to WAL. A database in
// memory (journal mode "memory") or with the journal off is left alone.
func useWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	switch strings.ToLower(mode) {
	case "delete", "truncate", "persist":
		return db.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
	}
	return nil
}

// Writer queues the write transactions of one backend in the process, so
// that its writers take SQLite's write lock in turn, in the order they
// asked, rather than racing for it in SQLite's busy loop: that loop is not
// fair, and on a pool of connections a writer may lose to the others past
// the busy timeout. Writers of other processes, and of other backends on
// the same file, still meet in the busy loop, one per backend. The zero
// Writer is not usable; make one with NewWriter.
type Writer struct{ turn chan struct{} }

// NewWriter returns a Writer.
func NewWriter() *Writer { return &Writer{turn: make(chan struct{}, 1)} }

// Tx waits for the writer's turn (or for ctx to end), then runs fn with
// WriteTx.
func (w *Writer) Tx(ctx context.Context, db *sql.DB, fn func(q Querier) error) error {
	select {
	case w.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-w.turn }()
	return WriteTx(ctx, db, fn)
}
