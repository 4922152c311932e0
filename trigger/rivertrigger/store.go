package rivertrigger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/ids"
	"github.com/valetkit/valet/internal/slogmin"
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
	// attempt, doubling with each (about two minutes over the eight).
	DefaultNotifyBackoff = time.Second
	// DefaultNotifyWorkers is how many notices one process delivers at
	// once.
	DefaultNotifyWorkers = 10
)

// JobKind is the River kind of a run's job.
const JobKind = "valet_trigger_run"

const (
	stopTimeout     = 30 * time.Second
	rollbackTimeout = 5 * time.Second
	// migrateLock is the advisory lock Migrate holds.
	migrateLock = int64(0x76616c6574747267) // "valettrg"
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
	// FetchPollInterval is River's: how often a worker polls for runs
	// when PostgreSQL's notifications do not wake it.
	// Default: River's, 1s.
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
	// as large: a run waits for one of its slots too. The default is
	// sized for runs that wait on a model, not on the CPU (see
	// Priorities and concurrency); give the pool connections for them.
	// Default: trigger.DefaultMaxConcurrent (100).
	MaxWorkers int
	// Namespace names the deployment the tasks belong to (Store.Namespace,
	// trigger.Namespaced): give the same to the event bus
	// (redisbus.Config{Namespace: store.Namespace()}), which names its
	// stream from it; trigger.New refuses a bus of another namespace.
	// Set it when two deployments use databases of the same name on
	// different servers (Engine.Run refuses the second to claim a stream,
	// see trigger.NamespaceClaimer), and when the schema is chosen
	// otherwise than by Schema or the connection string (a role's default
	// search_path, "$user", SET in AfterConnect). Default: the pool's
	// database and schema, "database/schema", the schema being Schema,
	// else the first of the search_path the pool's connection string sets
	// (a search_path parameter, or "-c search_path=…" in its options
	// parameter), else "public".
	Namespace string
	// NotifyAttempts is how often River tries the notice of a run's end
	// (see Notices) before it records the failure on the run.
	// Default: DefaultNotifyAttempts (8).
	NotifyAttempts int
	// NotifyBackoff is the wait after a notice's first failed attempt,
	// doubling with each, at most an hour.
	// Default: DefaultNotifyBackoff (1s).
	NotifyBackoff time.Duration
	// NotifyQueue is the River queue of the notices, apart from the
	// runs', so that a slow or failing Notifier never holds a run's
	// worker. Default: Queue + "_notify".
	NotifyQueue string
	// NotifyWorkers is how many notices this process delivers at once:
	// River's worker cap on NotifyQueue.
	// Default: DefaultNotifyWorkers (10).
	NotifyWorkers int
	// Queue is the River queue the runs go through. Engines that share a
	// database, a schema and a queue share the runs.
	// Default: DefaultQueue ("valet_trigger").
	Queue string
	// ReconcileInterval is how often Dispatch looks for runs River
	// discarded without valet recording their end.
	// Default: DefaultReconcileInterval (1m).
	ReconcileInterval time.Duration
	// RescueStuckJobsAfter is how long after its start River takes a run
	// for one whose worker died, and runs it again (River has no
	// heartbeats). It must exceed JobTimeout.
	// Default: DefaultRescueStuckJobsAfter (1h), or JobTimeout plus an
	// hour when that is later.
	RescueStuckJobsAfter time.Duration
	// TenantWindow is how many runs of one tenant may be ready at once
	// in the queue, across replicas: running, or available to a worker.
	// A tenant's due runs past it are held back and let in as its runs
	// end, so that another tenant's run waits behind at most this many
	// of one busy tenant's (see Tenants share the workers). Keep it at
	// least the replicas' MaxWorkers together, so that a tenant alone
	// still uses every worker. Negative: no window, River's order alone.
	// Default: 2 × MaxWorkers.
	TenantWindow int
	// Schema holds valet's tables and River's (river.Config.Schema; Migrate
	// creates both there): stores in different schemas of one database
	// keep apart, their tasks, runs and River jobs alike, whatever the
	// connection's search_path. The schema must exist. Default: "", the
	// connection's search_path.
	Schema string
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping trigger.ErrInvalid naming what it rejects. conn is the pool's
// connection config, which the default Namespace is read from.
func (c Config) withDefaults(conn pgconn.Config) (Config, error) {
	if c.MaxWorkers < 0 || c.JobTimeout < 0 || c.RescueStuckJobsAfter < 0 || c.FetchPollInterval < 0 ||
		c.FetchCooldown < 0 || c.ReconcileInterval < 0 || c.MaxRuns < 0 ||
		c.NotifyAttempts < 0 || c.NotifyBackoff < 0 || c.NotifyWorkers < 0 {
		return c, fmt.Errorf("%w: rivertrigger: negative setting in %+v", trigger.ErrInvalid, c)
	}
	if err := checkSchema(c.Schema); err != nil {
		return c, err
	}
	c.Queue = cmp.Or(c.Queue, DefaultQueue)
	c.MaxWorkers = cmp.Or(c.MaxWorkers, trigger.DefaultMaxConcurrent)
	c.TenantWindow = cmp.Or(c.TenantWindow, 2*c.MaxWorkers)
	c.NotifyQueue = cmp.Or(c.NotifyQueue, c.Queue+"_notify")
	if c.NotifyQueue == c.Queue {
		return c, fmt.Errorf("%w: rivertrigger: NotifyQueue is Queue %q", trigger.ErrInvalid, c.Queue)
	}
	c.NotifyAttempts = cmp.Or(c.NotifyAttempts, DefaultNotifyAttempts)
	c.NotifyBackoff = cmp.Or(c.NotifyBackoff, DefaultNotifyBackoff)
	c.NotifyWorkers = cmp.Or(c.NotifyWorkers, DefaultNotifyWorkers)
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultJobTimeout)
	if c.RescueStuckJobsAfter == 0 {
		c.RescueStuckJobsAfter = max(DefaultRescueStuckJobsAfter, c.JobTimeout+time.Hour)
	}
	if c.RescueStuckJobsAfter <= c.JobTimeout {
		return c, fmt.Errorf("%w: rivertrigger: RescueStuckJobsAfter %s is not above JobTimeout %s",
			trigger.ErrInvalid, c.RescueStuckJobsAfter, c.JobTimeout)
	}
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, DefaultReconcileInterval)
	c.MaxRuns = cmp.Or(c.MaxRuns, trigger.DefaultMaxRuns)
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Namespace == "" {
		c.Namespace = namespaceOf(conn, c.Schema)
	}
	return c, nil
}

// Store is a trigger.Store and trigger.Dispatcher on PostgreSQL through
// River. It is safe for concurrent use, also by several processes on the
// same database.
type Store struct {
	pool     *pgxpool.Pool
	client   *river.Client[pgx.Tx]
	cfg      Config
	log      *slog.Logger
	riverLog *slog.Logger
	names    *strings.Replacer // {tasks}, {runs}, {river_job}, {instance}: the tables in cfg.Schema

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
	_ trigger.SettlementKeeper = (*Store)(nil)
	_ trigger.Namespaced       = (*Store)(nil)
)

// New returns a Store on pool, which the caller configured and closes. It
// sends nothing to PostgreSQL; call Migrate once (from any number of
// processes) before the first use.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: rivertrigger: New needs a *pgxpool.Pool, got nil", trigger.ErrInvalid)
	}
	cfg, err := cfg.withDefaults(pool.Config().ConnConfig.Config)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, cfg: cfg, log: cfg.Logger}
	s.riverLog = slogmin.New(s.log.Handler(), slog.LevelWarn)
	table := func(name string) string {
		if cfg.Schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{cfg.Schema, name}.Sanitize()
	}
	s.names = strings.NewReplacer("{tasks}", table("valet_trigger_tasks"), "{runs}", table("valet_trigger_runs"),
		"{river_job}", table("river_job"), "{instance}", table("valet_trigger_instance"),
		"{settled}", table("valet_trigger_settled"))
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &worker{s: s}); err != nil {
		return nil, fmt.Errorf("rivertrigger: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &expiryWorker{s: s}); err != nil {
		return nil, fmt.Errorf("rivertrigger: %w", err)
	}
	if err := river.AddWorkerSafely(workers, &notifyWorker{s: s}); err != nil {
		return nil, fmt.Errorf("rivertrigger: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues: map[string]river.QueueConfig{cfg.Queue: {MaxWorkers: cfg.MaxWorkers},
			cfg.NotifyQueue: {MaxWorkers: cfg.NotifyWorkers}},
		Workers:              workers,
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		JobTimeout:           cfg.JobTimeout,
		FetchPollInterval:    cfg.FetchPollInterval,
		FetchCooldown:        cfg.FetchCooldown,
		Logger:               s.riverLog,
		Schema:               cfg.Schema,
	})
	if err != nil {
		return nil, fmt.Errorf("rivertrigger: %w", err)
	}
	s.client = client
	return s, nil
}

// sql returns query on the Store's tables: {tasks}, {runs} and
// {river_job} become their names, qualified by Config.Schema when set.
func (s *Store) sql(query string) string { return s.names.Replace(query) }

// Client returns the River client, for inspecting jobs (JobList) or
// subscribing to River's events. Do not start or stop it: Dispatch does.
func (s *Store) Client() *river.Client[pgx.Tx] { return s.client }

// Migrate brings River's tables to the version this River release needs
// and creates valet's tables (valet_trigger_tasks, valet_trigger_runs,
// and valet_trigger_instance with its instance id: InstanceID) if they do
// not exist, holding a session advisory lock throughout, so that
// several processes may run it at once. River applies its migrations one
// transaction each (some cannot share one).
func (s *Store) Migrate(ctx context.Context) error {
	return s.fail(ctx, "migrate", s.migrate(ctx))
}

func (s *Store) migrate(ctx context.Context) error {
	// The lock's session is a connection of its own, outside the pool,
	// which River's migrator draws on (a pool of one connection would
	// wait for itself).
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = conn.Close(cctx) // the session ends, and its lock with it
	}()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(s.pool), &rivermigrate.Config{Logger: s.riverLog, Schema: s.cfg.Schema})
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	for _, q := range append(tables[:len(tables):len(tables)], fairIndexes...) {
		if _, err := tx.Exec(ctx, s.sql(q)); err != nil {
			return err
		}
	}
	if err := s.migrateInstance(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// tables are the statements that create valet's tables, on the names
// of s.sql.
var tables = []string{
	`CREATE TABLE IF NOT EXISTS {tasks} (
		tenant_id  text        NOT NULL,
		id         text        NOT NULL,
		status     text        NOT NULL,
		next_run   timestamptz,
		priority   smallint    NOT NULL,
		revision   bigint      NOT NULL,
		created_at timestamptz NOT NULL,
		task       json        NOT NULL,
		PRIMARY KEY (tenant_id, id)
	)`,
	`CREATE INDEX IF NOT EXISTS valet_trigger_tasks_due
		ON {tasks} (next_run, priority DESC, tenant_id, id)
		WHERE status = 'ACTIVE' AND next_run IS NOT NULL`,
	`CREATE TABLE IF NOT EXISTS {runs} (
		tenant_id text   NOT NULL,
		task_id   text   NOT NULL,
		id        text   NOT NULL,
		seq       bigserial,
		run       json   NOT NULL,
		PRIMARY KEY (tenant_id, task_id, id),
		FOREIGN KEY (tenant_id, task_id) REFERENCES {tasks} (tenant_id, id) ON DELETE CASCADE
	)`,
	`CREATE INDEX IF NOT EXISTS valet_trigger_runs_seq ON {runs} (tenant_id, task_id, seq DESC)`,
	`CREATE TABLE IF NOT EXISTS {settled} (
		tenant_id   text   NOT NULL,
		task_id     text   NOT NULL,
		approval_id text   NOT NULL,
		seq         bigserial,
		settled     json   NOT NULL,
		PRIMARY KEY (tenant_id, task_id, approval_id),
		FOREIGN KEY (tenant_id, task_id) REFERENCES {tasks} (tenant_id, id) ON DELETE CASCADE
	)`,
}

// pgTime is t as PostgreSQL keeps it: UTC, to the microsecond.
func pgTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func normTask(t *trigger.Task) {
	t.NextRun, t.LastRun = pgTime(t.NextRun), pgTime(t.LastRun)
	t.CreatedAt, t.UpdatedAt = pgTime(t.CreatedAt), pgTime(t.UpdatedAt)
	if t.Trigger.Schedule.At.IsZero() && t.Trigger.Schedule.Start.IsZero() {
		return
	}
	t.Trigger.Schedule.At = pgTime(t.Trigger.Schedule.At)
	t.Trigger.Schedule.Start = pgTime(t.Trigger.Schedule.Start)
}

func normRun(r *trigger.Run) {
	r.DueAt, r.StartedAt, r.FinishedAt = pgTime(r.DueAt), pgTime(r.StartedAt), pgTime(r.FinishedAt)
}

func (s *Store) checkTask(t *trigger.Task) error {
	if err := t.Check(); err != nil {
		return err
	}
	if t.Budget.MaxWall > 0 && t.Budget.MaxWall+trigger.WallGrace >= s.cfg.JobTimeout {
		return fmt.Errorf("%w: task %q: Budget.MaxWall %s and the engine's grace of %s reach the store's JobTimeout %s",
			trigger.ErrInvalid, t.ID, t.Budget.MaxWall, trigger.WallGrace, s.cfg.JobTimeout)
	}
	return nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Create implements [trigger.Store.Create], queueing the task's run at
// NextRun when it is ACTIVE, in the same transaction.
func (s *Store) Create(ctx context.Context, t *trigger.Task) error {
	if err := s.checkTask(t); err != nil {
		return err
	}
	c := t.Clone()
	now := pgTime(s.cfg.Clock.Now())
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.UpdatedAt, c.Revision = now, 1
	normTask(c)
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("rivertrigger: create: %w", err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.sql(`INSERT INTO {tasks}
			(tenant_id, id, status, next_run, priority, revision, created_at, task)
			VALUES ($1, $2, $3, $4, $5, 1, $6, $7) ON CONFLICT DO NOTHING`),
			c.TenantID, c.ID, string(c.Status), nullTime(c.NextRun), c.Priority, c.CreatedAt, string(data))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
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

// checkIDs refuses, with trigger.ErrInvalid, an id no task can have
// (trigger.MaxIDLen bytes of UTF-8 without NUL), before PostgreSQL
// answers it with an error of its own.
func checkIDs(what ...string) error {
	for i := 0; i+1 < len(what); i += 2 {
		if !ids.Valid(what[i+1]) {
			return fmt.Errorf("%w: rivertrigger: %v", trigger.ErrInvalid, ids.Check(what[i], what[i+1]))
		}
	}
	return nil
}

// Get implements [trigger.Store.Get].
func (s *Store) Get(ctx context.Context, tenantID, id string) (*trigger.Task, error) {
	if err := checkIDs("tenant ID", tenantID, "task ID", id); err != nil {
		return nil, err
	}
	if t, ok, err := prefetched(ctx, tenantID, id).getPrefetched(); ok {
		return t, err
	}
	var data []byte
	err := s.pool.QueryRow(ctx, s.sql(`SELECT task FROM {tasks} WHERE tenant_id = $1 AND id = $2`),
		tenantID, id).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, tenantID, id)
	}
	if err != nil {
		return nil, s.fail(ctx, "get", err)
	}
	return decodeTask(data)
}

func decodeTask(data []byte) (*trigger.Task, error) {
	t := new(trigger.Task)
	if err := json.Unmarshal(data, t); err != nil {
		return nil, fmt.Errorf("rivertrigger: stored task: %w", err)
	}
	return t, nil
}

// List implements [trigger.Store.List].
func (s *Store) List(ctx context.Context, tenantID string, statuses ...trigger.Status) ([]*trigger.Task, error) {
	if err := checkIDs("tenant ID", tenantID); err != nil {
		return nil, err
	}
	var sts []string
	for _, st := range statuses {
		if err := st.Check(); err != nil {
			return nil, err
		}
		sts = append(sts, string(st))
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT task FROM {tasks}
		WHERE tenant_id = $1 AND ($2::text[] IS NULL OR status = ANY($2))
		ORDER BY created_at, id`), tenantID, sts)
	if err != nil {
		return nil, s.fail(ctx, "list", err)
	}
	return s.collectTasks(ctx, "list", rows)
}

func (s *Store) collectTasks(ctx context.Context, op string, rows pgx.Rows) ([]*trigger.Task, error) {
	datas, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.fail(ctx, op, err)
	}
	out := make([]*trigger.Task, 0, len(datas))
	for _, d := range datas {
		t, err := decodeTask(d)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Update implements [trigger.Store.Update], queueing the task's run at
// NextRun, in the same transaction, when the task becomes ACTIVE or its
// NextRun changes (once per due time: River's unique jobs).
func (s *Store) Update(ctx context.Context, t *trigger.Task) error {
	return s.update(ctx, "update", t, nil)
}

// Finish implements [trigger.Dispatcher.Finish]: the run's record, the
// task, the task's next run, the run of the next task when r succeeded
// and t's route chains (RouteChain, see Chained runs), the run's notice
// (see Notices) and, when r
// succeeded or was refused (not to be tried again) and ctx is the one
// River (or WorkDue) gave the run's job, the job's completion, in one
// transaction.
func (s *Store) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	if err := r.Check(); err != nil {
		return err
	}
	if r.TenantID != t.TenantID || r.TaskID != t.ID {
		return fmt.Errorf("%w: run %q is not of task %q", trigger.ErrInvalid, r.ID, t.ID)
	}
	var job *river.Job[runArgs] // the run's job, completed with the record
	if j := jobFrom(ctx); j != nil && (r.Status == trigger.RunSucceeded || r.Status == trigger.RunRefused) &&
		j.Args.TenantID == r.TenantID && j.Args.TaskID == r.TaskID && j.Args.DueAt.Equal(pgTime(r.DueAt)) {
		job = j
	}
	return s.updateWith(ctx, "finish", t, &r, job, func(tx pgx.Tx) error {
		if err := s.queueExpiry(ctx, tx, r); err != nil {
			return err
		}
		if err := s.chainInTx(ctx, tx, r, t); err != nil {
			return fmt.Errorf("queueing the chained run: %w", err)
		}
		return s.notifyInTx(ctx, tx, r, t)
	})
}

func (s *Store) update(ctx context.Context, op string, t *trigger.Task, also func(pgx.Tx) error) error {
	return s.updateWith(ctx, op, t, nil, nil, also)
}

// updateWith writes t over the stored task of the same revision, r,
// when set, over the stored run of its ID, and completes job, when set
// (see completeJob), then calls also, and queues t's run when it is
// ACTIVE and due otherwise than before, in one transaction. The task's
// row is locked, checked and written, r written and job completed in one
// statement (one round trip) when the stored task was created when t says
// it was, as a task read from the store was; otherwise the task is
// written again with the stored creation time.
func (s *Store) updateWith(ctx context.Context, op string, t *trigger.Task, r *trigger.Run, job *river.Job[runArgs],
	also func(pgx.Tx) error) error {
	if err := s.checkTask(t); err != nil {
		return err
	}
	c := t.Clone()
	c.UpdatedAt, c.Revision = s.cfg.Clock.Now(), t.Revision+1
	normTask(c)
	var runData *string // nil without r
	if r != nil {
		rc := *r
		normRun(&rc)
		d, err := json.Marshal(rc)
		if err != nil {
			return s.fail(ctx, op, err)
		}
		rd := string(d)
		runData = &rd
	}
	var jobID *int64
	var jobDone *time.Time // when the job is finalized: WorkDue's time, else the database's
	if job != nil {
		jobID = &job.ID
		if now, ok := ctx.Value(workDueKey{}).(time.Time); ok {
			jobDone = &now
		}
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		data, err := json.Marshal(c)
		if err != nil {
			return err
		}
		var rev int64
		var created time.Time
		var status string
		var next *time.Time
		var wrote, wroteRun bool
		err = tx.QueryRow(ctx, s.sql(`WITH old AS (SELECT revision, created_at, status, next_run FROM {tasks}
				WHERE tenant_id = $1 AND id = $2 FOR UPDATE),
			upd AS (UPDATE {tasks} t SET status = $3, next_run = $4, priority = $5, revision = $6, task = $7
				FROM old WHERE t.tenant_id = $1 AND t.id = $2 AND old.revision = $6 - 1 AND old.created_at = $8
				RETURNING 1),
			run AS (UPDATE {runs} SET run = $10 WHERE $9::text IS NOT NULL AND tenant_id = $1 AND task_id = $2
				AND id = $9 AND EXISTS (SELECT 1 FROM upd) RETURNING 1),
			job AS (UPDATE {river_job} SET state = 'completed', finalized_at = coalesce($12, now())
				WHERE $11::bigint IS NOT NULL AND id = $11 AND state = 'running' AND EXISTS (SELECT 1 FROM run))
			SELECT revision, created_at, status, next_run, EXISTS (SELECT 1 FROM upd), EXISTS (SELECT 1 FROM run)
			FROM old`),
			c.TenantID, c.ID, string(c.Status), nullTime(c.NextRun), c.Priority, c.Revision, string(data),
			c.CreatedAt, runID(r), runData, jobID, jobDone).Scan(&rev, &created, &status, &next, &wrote, &wroteRun)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, c.TenantID, c.ID)
		}
		if err != nil {
			return err
		}
		if rev != t.Revision {
			return fmt.Errorf("%w: tenant %q, task %q: revision %d, stored %d",
				trigger.ErrConflict, c.TenantID, c.ID, t.Revision, rev)
		}
		if !wrote { // created otherwise than t says: keep the stored time
			c.CreatedAt = created
			normTask(c)
			if data, err = json.Marshal(c); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.sql(`UPDATE {tasks}
				SET status = $3, next_run = $4, priority = $5, revision = $6, task = $7
				WHERE tenant_id = $1 AND id = $2`),
				c.TenantID, c.ID, string(c.Status), nullTime(c.NextRun), c.Priority, c.Revision, string(data)); err != nil {
				return err
			}
			if r != nil {
				tag, err := tx.Exec(ctx, s.sql(`UPDATE {runs} SET run = $4 WHERE tenant_id = $1 AND task_id = $2 AND id = $3`),
					c.TenantID, c.ID, r.ID, runData)
				if err != nil {
					return err
				}
				wroteRun = tag.RowsAffected() > 0
			}
			if job != nil && wroteRun {
				if err := s.completeJob(ctx, tx, job); err != nil {
					return fmt.Errorf("completing job %d: %w", job.ID, err)
				}
			}
		}
		if r != nil && !wroteRun {
			return fmt.Errorf("%w: tenant %q, task %q: run %q", trigger.ErrNotFound, r.TenantID, r.TaskID, r.ID)
		}
		if also != nil {
			if err := also(tx); err != nil {
				return err
			}
		}
		if status == string(trigger.StatusActive) && next != nil && next.Equal(c.NextRun) {
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

// runID is r's ID, nil without r.
func runID(r *trigger.Run) *string {
	if r == nil {
		return nil
	}
	return &r.ID
}

// Delete implements [trigger.Store.Delete]. A queued run of the task is
// dropped when it comes up.
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	if err := checkIDs("tenant ID", tenantID, "task ID", id); err != nil {
		return err
	}
	tag, err := s.pool.Exec(ctx, s.sql(`DELETE FROM {tasks} WHERE tenant_id = $1 AND id = $2`), tenantID, id)
	if err != nil {
		return s.fail(ctx, "delete", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, tenantID, id)
	}
	return nil
}

// inTx runs fn in a transaction and commits it when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx) // after Commit, pgx.ErrTxClosed
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// fail gives an error its context: the operation, a hint to run Migrate
// for a missing table, and ctx's error when it ended. The sentinel errors
// of trigger stay errors.Is-visible.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		err = fmt.Errorf("%w (run Migrate first)", err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("rivertrigger: %s: %w", op, err)
}
