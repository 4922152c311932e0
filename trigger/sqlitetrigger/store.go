package sqlitetrigger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/ids"
	"github.com/valetkit/valet/internal/slogmin"
	"github.com/valetkit/valet/internal/sqlitex"
	"github.com/valetkit/valet/trigger"
)

// Defaults of a zero Config.
const (
	// DefaultQueue is the River queue of valet's runs.
	DefaultQueue = "valet_trigger"
	// DefaultJobTimeout is how long River lets a run go on before it
	// cancels its context.
	DefaultJobTimeout = 15 * time.Minute
	// DefaultRescueStuckJobsAfter is how long a run may go on before River
	// takes it for one whose worker died and runs it again.
	DefaultRescueStuckJobsAfter = time.Hour
	// DefaultReconcileInterval is how often a dispatching Store looks for
	// runs River discarded without valet's code recording it.
	DefaultReconcileInterval = time.Minute
	// DefaultNotifyAttempts is how often a run's notice is tried.
	DefaultNotifyAttempts = 8
	// DefaultNotifyBackoff is the wait after a notice's first failed
	// attempt, doubling with each.
	DefaultNotifyBackoff = time.Second
	// DefaultNotifyWorkers is how many notices one process delivers at
	// once.
	DefaultNotifyWorkers = 10
	// DefaultMaxWorkers is how many runs the process executes at once.
	DefaultMaxWorkers = 10
)

// JobKind is the River kind of a run's job.
const JobKind = "valet_trigger_run"

// SchemaVersion is the version of valet's trigger tables this code
// writes, recorded in the file's valet_schema_versions table under
// "trigger/valet_trigger". Migrate refuses a file recording a newer one.
const SchemaVersion = 1

// component is the name SchemaVersion is recorded under.
const component = "trigger/valet_trigger"

// ErrSchemaTooNew is returned by Migrate for a file written by a newer
// version of valet; the error names both versions. It is the same value
// in every SQLite backend of valet.
var ErrSchemaTooNew = sqlitex.ErrSchemaTooNew

// ErrNoBusyTimeout is returned by Migrate for a database opened without
// a busy timeout. It is the same value in every SQLite backend of valet.
var ErrNoBusyTimeout = sqlitex.ErrNoBusyTimeout

// ErrDispatching is returned by Dispatch (and so by trigger.Engine.Run)
// when another process, or another Store of this process, dispatches the
// triggers of the same file: River's SQLite driver is made for one
// process working a file's jobs. The error names the lock file.
var ErrDispatching = errors.New("sqlitetrigger: another process dispatches the triggers of this file")

const (
	stopTimeout     = 30 * time.Second
	rollbackTimeout = 5 * time.Second
)

// Config configures a Store. The zero value means the documented
// defaults.
type Config struct {
	// Clock gives CreatedAt and UpdatedAt. River keeps the database's
	// time for its jobs. Default: clock.System.
	Clock clock.Clock
	// FetchCooldown is River's least time between two fetches of runs.
	// Default: River's, 100ms.
	FetchCooldown time.Duration
	// FetchPollInterval is how often River looks for runs that became
	// available. Default: River's, 1s.
	FetchPollInterval time.Duration
	// JobTimeout is how long River lets a run go on before it cancels
	// it. Set it above the longest run: the engine's RunTimeout and every
	// task's Budget.MaxWall plus trigger.WallGrace (Create and Update
	// refuse a task whose MaxWall reaches it).
	// Default: DefaultJobTimeout (15m).
	JobTimeout time.Duration
	// Logger receives what the dispatcher cannot return, and River's own
	// logs at warning level and above. Default: slog.Default().
	Logger *slog.Logger
	// MaxRuns is how many runs the history keeps per task, the newest.
	// Default: trigger.DefaultMaxRuns.
	MaxRuns int
	// MaxWorkers is how many runs this process executes at once: River's
	// worker cap on the queue. Keep the engine's MaxConcurrent at least
	// as large. Default: DefaultMaxWorkers (10).
	MaxWorkers int
	// NotifyAttempts is how often River tries the notice of a run's end
	// before it records the failure on the run.
	// Default: DefaultNotifyAttempts (8).
	NotifyAttempts int
	// NotifyBackoff is the wait after a notice's first failed attempt,
	// doubling with each, at most an hour.
	// Default: DefaultNotifyBackoff (1s).
	NotifyBackoff time.Duration
	// NotifyWorkers is how many notices this process delivers at once.
	// Default: DefaultNotifyWorkers (10).
	NotifyWorkers int
	// Queue is the River queue the runs go through; the notices go
	// through Queue + "_notify". Default: DefaultQueue ("valet_trigger").
	Queue string
	// ReconcileInterval is how often Dispatch looks for runs River
	// discarded without valet recording their end.
	// Default: DefaultReconcileInterval (1m).
	ReconcileInterval time.Duration
	// RescueStuckJobsAfter is how long after its start River takes a run
	// for one whose worker died (a process killed), and runs it again. It
	// must exceed JobTimeout. Default: DefaultRescueStuckJobsAfter (1h),
	// or JobTimeout plus an hour when that is later.
	RescueStuckJobsAfter time.Duration
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping trigger.ErrInvalid naming what it rejects.
func (c Config) withDefaults() (Config, error) {
	if c.MaxWorkers < 0 || c.JobTimeout < 0 || c.RescueStuckJobsAfter < 0 || c.FetchPollInterval < 0 ||
		c.FetchCooldown < 0 || c.ReconcileInterval < 0 || c.MaxRuns < 0 ||
		c.NotifyAttempts < 0 || c.NotifyBackoff < 0 || c.NotifyWorkers < 0 {
		return c, fmt.Errorf("%w: sqlitetrigger: negative setting in %+v", trigger.ErrInvalid, c)
	}
	c.Queue = cmp.Or(c.Queue, DefaultQueue)
	if len(c.Queue)+len("_notify") >= 128 || strings.IndexByte(c.Queue, 0) >= 0 {
		return c, fmt.Errorf("%w: sqlitetrigger: Queue %q is not a River queue name (under 121 bytes, no NUL)", trigger.ErrInvalid, c.Queue)
	}
	c.MaxWorkers = cmp.Or(c.MaxWorkers, DefaultMaxWorkers)
	c.NotifyAttempts = cmp.Or(c.NotifyAttempts, DefaultNotifyAttempts)
	c.NotifyBackoff = cmp.Or(c.NotifyBackoff, DefaultNotifyBackoff)
	c.NotifyWorkers = cmp.Or(c.NotifyWorkers, DefaultNotifyWorkers)
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultJobTimeout)
	if c.RescueStuckJobsAfter == 0 {
		c.RescueStuckJobsAfter = max(DefaultRescueStuckJobsAfter, c.JobTimeout+time.Hour)
	}
	if c.RescueStuckJobsAfter <= c.JobTimeout {
		return c, fmt.Errorf("%w: sqlitetrigger: RescueStuckJobsAfter %s is not above JobTimeout %s",
			trigger.ErrInvalid, c.RescueStuckJobsAfter, c.JobTimeout)
	}
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, DefaultReconcileInterval)
	c.MaxRuns = cmp.Or(c.MaxRuns, trigger.DefaultMaxRuns)
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c, nil
}

// Store is a trigger.Store and trigger.Dispatcher on an SQLite file
// through River's riversqlite driver. It is safe for concurrent use.
type Store struct {
	db          *sql.DB
	client      *river.Client[*sql.Tx]
	cfg         Config
	notifyQueue string
	log         *slog.Logger
	riverLog    *slog.Logger

	handler    atomic.Pointer[trigger.DueHandler]
	dispatchMu sync.Mutex
	stopping   atomic.Bool // Dispatch is stopping River
}

var (
	_ trigger.Dispatcher       = (*Store)(nil)
	_ trigger.ExpiryDispatcher = (*Store)(nil)
	_ trigger.NotifyDispatcher = (*Store)(nil)
	_ trigger.RunSwapper       = (*Store)(nil)
	_ trigger.RunSettler       = (*Store)(nil)
)

// New returns a Store on db, an SQLite database the caller opened (with
// modernc.org/sqlite, see the package documentation) and closes. It
// sends nothing to the database; call Migrate once per start before the
// first use.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: sqlitetrigger: New needs a *sql.DB, got nil", trigger.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, cfg: cfg, log: cfg.Logger, notifyQueue: cfg.Queue + "_notify"}
	s.riverLog = slogmin.New(s.log.Handler(), slog.LevelWarn)
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{s: s}); err != nil {
		return nil, fmt.Errorf("sqlitetrigger: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &expiryWorker{s: s}); err != nil {
		return nil, fmt.Errorf("sqlitetrigger: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &notifyWorker{s: s}); err != nil {
		return nil, fmt.Errorf("sqlitetrigger: %w", err)
	}
	client, err := river.NewClient(riversqlite.New(db), &river.Config{
		Queues: map[string]river.QueueConfig{cfg.Queue: {MaxWorkers: cfg.MaxWorkers},
			s.notifyQueue: {MaxWorkers: cfg.NotifyWorkers}},
		Workers:              workers,
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		JobTimeout:           cfg.JobTimeout,
		FetchPollInterval:    cfg.FetchPollInterval,
		FetchCooldown:        cfg.FetchCooldown,
		Logger:               s.riverLog,
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitetrigger: %w", err)
	}
	s.client = client
	return s, nil
}

// Migrate creates valet's trigger tables if they do not exist and
// records their version, then brings River's tables to the version this
// River release needs (rivermigrate). It is idempotent and safe to run at
// every start. A file recording a newer version of valet's tables is
// refused with ErrSchemaTooNew, naming both versions, before anything is
// written; a connection without a busy timeout with ErrNoBusyTimeout.
// Run it from one process at a time.
func (s *Store) Migrate(ctx context.Context) error {
	unlock, err := s.lockMigrate(ctx)
	if err != nil {
		return s.fail(ctx, "migrate", err)
	}
	defer unlock()
	err = sqlitex.Migrate(ctx, s.db, component, SchemaVersion, func(q sqlitex.Querier, from int) error {
		for _, stmt := range tables {
			if _, err := q.ExecContext(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return s.fail(ctx, "migrate", err)
	}
	m, err := rivermigrate.New(riversqlite.New(s.db), &rivermigrate.Config{Logger: s.riverLog})
	if err != nil {
		return s.fail(ctx, "migrate", err)
	}
	// A version is applied in a transaction of its own and River reads
	// the versions applied first: one cut short by SQLITE_BUSY (another
	// process's store migrating the same new file) is applied again.
	if err := sqlitex.RetryBusy(ctx, func() error {
		_, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		return err
	}); err != nil {
		return s.fail(ctx, "migrate", fmt.Errorf("river migrations: %w", err))
	}
	return nil
}

// tables are the statements that create valet's tables. Times are
// INTEGER milliseconds since 1970 UTC (River keeps milliseconds on
// SQLite); the task and run are JSON text.
var tables = []string{
	`CREATE TABLE IF NOT EXISTS valet_trigger_tasks (
	tenant_id  TEXT    NOT NULL,
	id         TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	next_run   INTEGER,
	priority   INTEGER NOT NULL,
	revision   INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	task       TEXT    NOT NULL,
	PRIMARY KEY (tenant_id, id)
)`,
	`CREATE INDEX IF NOT EXISTS valet_trigger_tasks_due
	ON valet_trigger_tasks (next_run, priority DESC, tenant_id, id)
	WHERE status = 'ACTIVE' AND next_run IS NOT NULL`,
	`CREATE TABLE IF NOT EXISTS valet_trigger_runs (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	tenant_id TEXT NOT NULL,
	task_id   TEXT NOT NULL,
	id        TEXT NOT NULL,
	run       TEXT NOT NULL,
	UNIQUE (tenant_id, task_id, id),
	FOREIGN KEY (tenant_id, task_id) REFERENCES valet_trigger_tasks (tenant_id, id) ON DELETE CASCADE
)`,
	`CREATE INDEX IF NOT EXISTS valet_trigger_runs_seq ON valet_trigger_runs (tenant_id, task_id, seq DESC)`,
	// The first statement of every write transaction of the Store writes
	// here, taking SQLite's write lock before anything is read.
	`CREATE TABLE IF NOT EXISTS valet_trigger_write (one INTEGER PRIMARY KEY CHECK (one = 1))`,
}

// sqlTime is t as the store keeps it: UTC, to the millisecond (River's
// precision on SQLite).
func sqlTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

// millis is t in milliseconds since 1970, nil for the zero time.
func millis(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

func normTask(t *trigger.Task) {
	t.NextRun, t.LastRun = sqlTime(t.NextRun), sqlTime(t.LastRun)
	t.CreatedAt, t.UpdatedAt = sqlTime(t.CreatedAt), sqlTime(t.UpdatedAt)
	if t.Trigger.Schedule.At.IsZero() && t.Trigger.Schedule.Start.IsZero() {
		return
	}
	t.Trigger.Schedule.At = sqlTime(t.Trigger.Schedule.At)
	t.Trigger.Schedule.Start = sqlTime(t.Trigger.Schedule.Start)
}

func normRun(r *trigger.Run) {
	r.DueAt, r.StartedAt, r.FinishedAt = sqlTime(r.DueAt), sqlTime(r.StartedAt), sqlTime(r.FinishedAt)
}

func (s *Store) checkTask(t *trigger.Task) error {
	if t == nil {
		return fmt.Errorf("%w: sqlitetrigger: nil task", trigger.ErrInvalid)
	}
	if err := t.Check(); err != nil {
		return err
	}
	if t.Budget.MaxWall > 0 && t.Budget.MaxWall+trigger.WallGrace >= s.cfg.JobTimeout {
		return fmt.Errorf("%w: task %q: Budget.MaxWall %s and the engine's grace of %s reach the store's JobTimeout %s",
			trigger.ErrInvalid, t.ID, t.Budget.MaxWall, trigger.WallGrace, s.cfg.JobTimeout)
	}
	return nil
}

// checkIDs refuses, with trigger.ErrInvalid, an id no task can have.
func checkIDs(what ...string) error {
	for i := 0; i+1 < len(what); i += 2 {
		if !ids.Valid(what[i+1]) {
			return fmt.Errorf("%w: sqlitetrigger: %v", trigger.ErrInvalid, ids.Check(what[i], what[i+1]))
		}
	}
	return nil
}

// Create implements [trigger.Store.Create], queueing the task's run at
// NextRun when it is ACTIVE, in the same transaction.
func (s *Store) Create(ctx context.Context, t *trigger.Task) error {
	if err := s.checkTask(t); err != nil {
		return err
	}
	c := t.Clone()
	now := sqlTime(s.cfg.Clock.Now())
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.UpdatedAt, c.Revision = now, 1
	normTask(c)
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("sqlitetrigger: create: %w", err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO valet_trigger_tasks
			(tenant_id, id, status, next_run, priority, revision, created_at, task)
			VALUES (?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT DO NOTHING`,
			c.TenantID, c.ID, string(c.Status), millis(c.NextRun), c.Priority, c.CreatedAt.UnixMilli(), string(data))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: tenant %q, task %q exists", trigger.ErrConflict, c.TenantID, c.ID)
		}
		return s.enqueue(ctx, tx, c)
	})
	if err != nil {
		return s.fail(ctx, "create", err)
	}
	*t = *c
	return nil
}

// Get implements [trigger.Store.Get].
func (s *Store) Get(ctx context.Context, tenantID, id string) (*trigger.Task, error) {
	if err := checkIDs("tenant ID", tenantID, "task ID", id); err != nil {
		return nil, err
	}
	t, err := getTask(ctx, s.db, tenantID, id, false)
	if err != nil {
		return nil, s.fail(ctx, "get", err)
	}
	return t, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// getTask reads a task through q; activeOnly asks for an ACTIVE one.
func getTask(ctx context.Context, q querier, tenantID, id string, activeOnly bool) (*trigger.Task, error) {
	query := `SELECT task FROM valet_trigger_tasks WHERE tenant_id = ? AND id = ?`
	if activeOnly {
		query += ` AND status = 'ACTIVE'`
	}
	var data []byte
	err := q.QueryRowContext(ctx, query, tenantID, id).Scan(&data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, tenantID, id)
	}
	if err != nil {
		return nil, err
	}
	return decodeTask(data)
}

func decodeTask(data []byte) (*trigger.Task, error) {
	t := new(trigger.Task)
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("sqlitetrigger: stored task: %w", err)
	}
	return t, nil
}

// List implements [trigger.Store.List].
func (s *Store) List(ctx context.Context, tenantID string, statuses ...trigger.Status) ([]*trigger.Task, error) {
	if err := checkIDs("tenant ID", tenantID); err != nil {
		return nil, err
	}
	sts := make([]string, 0, len(statuses))
	for _, st := range statuses {
		if err := st.Check(); err != nil {
			return nil, err
		}
		sts = append(sts, string(st))
	}
	filter, err := json.Marshal(sts)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT task FROM valet_trigger_tasks
		WHERE tenant_id = ?1 AND (?2 = '[]' OR status IN (SELECT value FROM json_each(?2)))
		ORDER BY created_at, id`, tenantID, string(filter))
	if err != nil {
		return nil, s.fail(ctx, "list", err)
	}
	return s.collectTasks(ctx, "list", rows)
}

func (s *Store) collectTasks(ctx context.Context, op string, rows *sql.Rows) ([]*trigger.Task, error) {
	defer rows.Close()
	var out []*trigger.Task
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, s.fail(ctx, op, err)
		}
		t, err := decodeTask(data)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, op, err)
	}
	if out == nil {
		out = []*trigger.Task{}
	}
	return out, nil
}

// Due implements [trigger.Store.Due]. The engine does not poll it on this
// store (River delivers the runs); it is there for inspection.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]*trigger.Task, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d is not positive", trigger.ErrInvalid, limit)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT task FROM valet_trigger_tasks
		WHERE status = 'ACTIVE' AND next_run IS NOT NULL AND next_run <= ?
		ORDER BY next_run, priority DESC, tenant_id, id LIMIT ?`, now.UnixMilli(), limit)
	if err != nil {
		return nil, s.fail(ctx, "due", err)
	}
	return s.collectTasks(ctx, "due", rows)
}

// Update implements [trigger.Store.Update], queueing the task's run at
// NextRun, in the same transaction, when the task becomes ACTIVE or its
// NextRun changes (once per due time: River's unique jobs).
func (s *Store) Update(ctx context.Context, t *trigger.Task) error {
	return s.update(ctx, "update", t, nil)
}

// Finish implements [trigger.Dispatcher.Finish]: the run's record, the
// task, the task's next run, the run of the next task when r succeeded
// and t's route chains, the run's notice and, when r succeeded or was
// refused and ctx is the one River gave the run's job, the job's
// completion, in one transaction.
func (s *Store) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	if err := r.Check(); err != nil {
		return err
	}
	if t == nil || r.TenantID != t.TenantID || r.TaskID != t.ID {
		return fmt.Errorf("%w: run %q is not of the task given", trigger.ErrInvalid, r.ID)
	}
	return s.update(ctx, "finish", t, func(tx *sql.Tx) error {
		if err := s.writeRun(ctx, tx, r, nil); err != nil {
			return err
		}
		if err := s.chainInTx(ctx, tx, r, t); err != nil {
			return fmt.Errorf("queueing the chained run: %w", err)
		}
		if err := s.notifyInTx(ctx, tx, r, t); err != nil {
			return err
		}
		if job := jobFrom(ctx); job != nil && (r.Status == trigger.RunSucceeded || r.Status == trigger.RunRefused) &&
			job.Args.TenantID == r.TenantID && job.Args.TaskID == r.TaskID && job.Args.DueAt.Equal(sqlTime(r.DueAt)) {
			if _, err := river.JobCompleteTx[*riversqlite.Driver](ctx, tx, job); err != nil {
				return fmt.Errorf("completing job %d: %w", job.ID, err)
			}
		}
		return nil
	})
}

func (s *Store) update(ctx context.Context, op string, t *trigger.Task, also func(*sql.Tx) error) error {
	if err := s.checkTask(t); err != nil {
		return err
	}
	c := t.Clone()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var rev, created int64
		var status string
		var next sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT revision, created_at, status, next_run FROM valet_trigger_tasks
			WHERE tenant_id = ? AND id = ?`, c.TenantID, c.ID).Scan(&rev, &created, &status, &next)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, c.TenantID, c.ID)
		}
		if err != nil {
			return err
		}
		if rev != c.Revision {
			return fmt.Errorf("%w: tenant %q, task %q: revision %d, stored %d",
				trigger.ErrConflict, c.TenantID, c.ID, c.Revision, rev)
		}
		c.CreatedAt, c.UpdatedAt, c.Revision = time.UnixMilli(created), s.cfg.Clock.Now(), rev+1
		normTask(c)
		data, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE valet_trigger_tasks
			SET status = ?, next_run = ?, priority = ?, revision = ?, task = ?
			WHERE tenant_id = ? AND id = ?`,
			string(c.Status), millis(c.NextRun), c.Priority, c.Revision, string(data), c.TenantID, c.ID); err != nil {
			return err
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if status == string(trigger.StatusActive) && next.Valid && !c.NextRun.IsZero() && next.Int64 == c.NextRun.UnixMilli() {
			return nil // due as before: its run is queued already
		}
		return s.enqueue(ctx, tx, c)
	})
	if err != nil {
		return s.fail(ctx, op, err)
	}
	*t = *c
	return nil
}

// Delete implements [trigger.Store.Delete], with the task's runs. A
// queued run of the task is dropped when it comes up.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	if err := checkIDs("tenant ID", tenantID, "task ID", id); err != nil {
		return err
	}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		// The runs go explicitly, also on a connection opened without
		// foreign_keys.
		if _, err := tx.ExecContext(ctx, `DELETE FROM valet_trigger_runs WHERE tenant_id = ? AND task_id = ?`, tenantID, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM valet_trigger_tasks WHERE tenant_id = ? AND id = ?`, tenantID, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, tenantID, id)
		}
		return nil
	})
	return s.fail(ctx, "delete", err)
}

// inTx runs fn in a transaction that holds SQLite's write lock from its
// start, and commits it when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit, sql.ErrTxDone
	// A write first, so that the transaction takes the write lock (waiting
	// up to the busy timeout) before it reads anything: a deferred
	// transaction that read first could not write after another
	// connection did.
	if _, err := tx.ExecContext(ctx, `DELETE FROM valet_trigger_write`); err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// fail gives an error its context: the operation, what SQLite's error
// means for the user (sqlitex.Explain), and ctx's error when it ended.
// The sentinel errors of trigger stay errors.Is-visible.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, trigger.ErrNotFound) || errors.Is(err, trigger.ErrConflict) || errors.Is(err, trigger.ErrInvalid) {
		return err
	}
	err = sqlitex.Explain(err)
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("sqlitetrigger: %s: %w", op, err)
}
