package pgdelegate

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
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/slogmin"
)

// Defaults of a zero Config.
const (
	// DefaultQueue is the River queue of the engine's jobs.
	DefaultQueue = "valet_delegate"
	// DefaultJobTimeout is how long River lets a task's run or a delivery
	// go on before it cancels its context.
	DefaultJobTimeout = 30 * time.Minute
	// DefaultRescueStuckJobsAfter is how long a job may run before River
	// takes it for one whose worker died and runs it again.
	DefaultRescueStuckJobsAfter = time.Hour
	// DefaultDeliverAttempts is how many times a delivery job is tried
	// with a growing delay before it is tried every MaxRetryDelay.
	DefaultDeliverAttempts = 25
)

// River kinds of the engine's jobs.
const (
	// TaskJobKind is the kind of a task's job.
	TaskJobKind = "valet_delegate_task"
	// DeliverJobKind is the kind of a graph's delivery job.
	DeliverJobKind = "valet_delegate_deliver"
	// PruneJobKind is the kind of the periodic job dropping what
	// Retention let go.
	PruneJobKind = "valet_delegate_prune"
)

const (
	stopTimeout     = 30 * time.Second
	rollbackTimeout = 5 * time.Second
	// migrateLock is the advisory lock Migrate holds.
	migrateLock = int64(0x76616c6574646c67) // "valetdlg"
)

// Config configures an Engine. The zero value means the documented
// defaults.
type Config struct {
	// Clock gives the times of results, tasks and graphs, and judges a
	// graph's MaxWall. River keeps the database's time for its jobs.
	// Default: clock.System.
	Clock clock.Clock
	// DeliverAttempts is how many times River tries a delivery job with
	// a growing delay; past them the job is not discarded but tried every
	// MaxRetryDelay while the engine runs. Default:
	// DefaultDeliverAttempts (25).
	DeliverAttempts int
	// FetchCooldown and FetchPollInterval are River's (see
	// river.Config). Default: River's (100ms, 1s).
	FetchCooldown, FetchPollInterval time.Duration
	// JobTimeout is how long River lets a task's run or a delivery go on
	// before it cancels it: set it above the longest sub-agent run.
	// Default: DefaultJobTimeout (30m).
	JobTimeout time.Duration
	// Logger receives River's logs at warning level and above.
	// Default: slog.Default().
	Logger *slog.Logger
	// MaxAttempts is how many runs of a task may return an error before
	// the task fails. Default: delegate.DefaultMaxAttempts (3).
	MaxAttempts int
	// Parallel is how many tasks and deliveries this process works at
	// once: River's MaxWorkers on the queue. Replicas add theirs.
	// Default: delegate.DefaultParallel (4).
	Parallel int
	// Queue is the River queue of the jobs. Engines sharing a database,
	// a schema and a queue share the work. Default: DefaultQueue.
	Queue string
	// RescueStuckJobsAfter is how long after its start River takes a job
	// for one whose worker died (a killed process) and runs it again: a
	// task's run is then run again. It must exceed JobTimeout.
	// Default: DefaultRescueStuckJobsAfter (1h), or JobTimeout plus an
	// hour when that is later.
	RescueStuckJobsAfter time.Duration
	// Retention is how long a graph is kept once it ended and was
	// delivered, and a result once stored (a graph's results as long as
	// their graph). Default: delegate.DefaultRetention (24h).
	Retention time.Duration
	// RetryDelay is the wait before a task's run is tried again after an
	// error, and before a failed delivery is; it doubles with each
	// attempt up to MaxRetryDelay. Defaults: delegate.DefaultRetryDelay
	// (1s), delegate.DefaultMaxRetryDelay (5m).
	RetryDelay, MaxRetryDelay time.Duration
	// Schema holds the engine's tables and River's (river.Config.Schema;
	// Migrate creates both there). The schema must exist.
	// Default: "", the connection's search_path.
	Schema string
}

func (c Config) withDefaults() (Config, error) {
	if c.DeliverAttempts < 0 || c.FetchCooldown < 0 || c.FetchPollInterval < 0 || c.JobTimeout < 0 ||
		c.MaxAttempts < 0 || c.Parallel < 0 || c.RescueStuckJobsAfter < 0 || c.Retention < 0 ||
		c.RetryDelay < 0 || c.MaxRetryDelay < 0 {
		return c, fmt.Errorf("%w: pgdelegate: negative setting in %+v", delegate.ErrInvalid, c)
	}
	if strings.ContainsRune(c.Schema, 0) || len(c.Schema) > 63 {
		return c, fmt.Errorf("%w: pgdelegate: schema %q is not a PostgreSQL name", delegate.ErrInvalid, c.Schema)
	}
	c.Clock = clock.Or(c.Clock)
	c.DeliverAttempts = cmp.Or(c.DeliverAttempts, DefaultDeliverAttempts)
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultJobTimeout)
	if c.RescueStuckJobsAfter == 0 {
		c.RescueStuckJobsAfter = max(DefaultRescueStuckJobsAfter, c.JobTimeout+time.Hour)
	}
	if c.RescueStuckJobsAfter <= c.JobTimeout {
		return c, fmt.Errorf("%w: pgdelegate: RescueStuckJobsAfter %s is not above JobTimeout %s",
			delegate.ErrInvalid, c.RescueStuckJobsAfter, c.JobTimeout)
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxAttempts = cmp.Or(c.MaxAttempts, delegate.DefaultMaxAttempts)
	c.Parallel = cmp.Or(c.Parallel, delegate.DefaultParallel)
	c.Queue = cmp.Or(c.Queue, DefaultQueue)
	c.Retention = cmp.Or(c.Retention, delegate.DefaultRetention)
	c.RetryDelay = cmp.Or(c.RetryDelay, delegate.DefaultRetryDelay)
	c.MaxRetryDelay = max(cmp.Or(c.MaxRetryDelay, delegate.DefaultMaxRetryDelay), c.RetryDelay)
	return c, nil
}

// Engine is a delegate.Engine on PostgreSQL whose tasks and deliveries
// are River jobs. It is safe for concurrent use, also by several
// processes on the same schema.
type Engine struct {
	pool   *pgxpool.Pool
	client *river.Client[pgx.Tx]
	cfg    Config
	names  *strings.Replacer

	exec     atomic.Pointer[delegate.Executor]
	runMu    sync.Mutex
	stopping atomic.Bool
}

var (
	_ delegate.Engine    = (*Engine)(nil)
	_ delegate.Canceller = (*Engine)(nil)
)

// New returns an Engine on pool, which the caller configured and closes.
// It sends nothing to PostgreSQL; call Migrate once (from any number of
// processes) before the first use.
func New(pool *pgxpool.Pool, cfg Config) (*Engine, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgdelegate: New needs a *pgxpool.Pool, got nil", delegate.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{pool: pool, cfg: cfg}
	table := func(name string) string {
		if cfg.Schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{cfg.Schema, name}.Sanitize()
	}
	e.names = strings.NewReplacer("{results}", table("valet_delegate_results"), "{graphs}", table("valet_delegate_graphs"),
		"{tasks}", table("valet_delegate_tasks"), "{edges}", table("valet_delegate_edges"), "{jobs}", table("river_job"))
	workers := river.NewWorkers()
	for _, add := range []func() error{
		func() error { return river.AddWorkerSafely(workers, &taskWorker{e: e}) },
		func() error { return river.AddWorkerSafely(workers, &deliverWorker{e: e}) },
		func() error { return river.AddWorkerSafely(workers, &pruneWorker{e: e}) },
	} {
		if err := add(); err != nil {
			return nil, fmt.Errorf("pgdelegate: %w", err)
		}
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{cfg.Queue: {MaxWorkers: cfg.Parallel}},
		Workers:              workers,
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		JobTimeout:           cfg.JobTimeout,
		FetchPollInterval:    cfg.FetchPollInterval,
		FetchCooldown:        cfg.FetchCooldown,
		Logger:               slogmin.New(cfg.Logger.Handler(), slog.LevelWarn),
		Schema:               cfg.Schema,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(
			river.PeriodicInterval(min(cfg.Retention, time.Hour)),
			func() (river.JobArgs, *river.InsertOpts) {
				return pruneArgs{}, &river.InsertOpts{Queue: cfg.Queue, UniqueOpts: river.UniqueOpts{ByPeriod: time.Minute}}
			}, &river.PeriodicJobOpts{RunOnStart: true})},
	})
	if err != nil {
		return nil, fmt.Errorf("pgdelegate: %w", err)
	}
	e.client = client
	return e, nil
}

// Client returns the River client, for inspecting jobs. Do not start or
// stop it: Run does.
func (e *Engine) Client() *river.Client[pgx.Tx] { return e.client }

func (e *Engine) sql(q string) string { return e.names.Replace(q) }

// tables are the statements that create the engine's tables.
var tables = []string{
	`CREATE TABLE IF NOT EXISTS {results} (
		tenant_id       text        NOT NULL,
		id              text        NOT NULL,
		conversation_id text        NOT NULL,
		graph_id        text        NOT NULL,
		task_id         text        NOT NULL,
		skill           text        NOT NULL,
		text            text        NOT NULL,
		status          text        NOT NULL,
		usage           jsonb       NOT NULL,
		created_at      timestamptz NOT NULL,
		PRIMARY KEY (tenant_id, id)
	)`,
	`CREATE INDEX IF NOT EXISTS valet_delegate_results_created ON {results} (created_at)`,
	`CREATE TABLE IF NOT EXISTS {graphs} (
		tenant_id       text        NOT NULL,
		id              text        NOT NULL,
		conversation_id text        NOT NULL,
		model           text        NOT NULL,
		budget          jsonb       NOT NULL,
		status          text        NOT NULL,
		consumed        jsonb       NOT NULL,
		delivered       boolean     NOT NULL DEFAULT false,
		tasks_left      integer     NOT NULL,
		created_at      timestamptz NOT NULL,
		ended_at        timestamptz,
		PRIMARY KEY (tenant_id, id)
	)`,
	`CREATE INDEX IF NOT EXISTS valet_delegate_graphs_undelivered ON {graphs} (ended_at)
		WHERE status <> 'running' AND NOT delivered`,
	`CREATE TABLE IF NOT EXISTS {tasks} (
		tenant_id  text        NOT NULL,
		graph_id   text        NOT NULL,
		id         text        NOT NULL,
		seq        integer     NOT NULL,
		skill      text        NOT NULL,
		task       text        NOT NULL,
		context    text        NOT NULL,
		depends_on text[]      NOT NULL,
		waiting    integer     NOT NULL,
		status     text        NOT NULL,
		result_id  text        NOT NULL DEFAULT '',
		error      text        NOT NULL DEFAULT '',
		attempts   integer     NOT NULL DEFAULT 0,
		started_at timestamptz,
		ended_at   timestamptz,
		PRIMARY KEY (tenant_id, graph_id, id),
		FOREIGN KEY (tenant_id, graph_id) REFERENCES {graphs} (tenant_id, id) ON DELETE CASCADE
	)`,
	`CREATE TABLE IF NOT EXISTS {edges} (
		tenant_id text NOT NULL,
		graph_id  text NOT NULL,
		dep       text NOT NULL,
		task      text NOT NULL,
		PRIMARY KEY (tenant_id, graph_id, dep, task),
		FOREIGN KEY (tenant_id, graph_id) REFERENCES {graphs} (tenant_id, id) ON DELETE CASCADE
	)`,
}

// Migrate brings River's tables to the version this River release needs
// and creates the engine's tables (valet_delegate_results, _graphs,
// _tasks, _edges) if they do not exist, holding a session advisory lock
// throughout, so that several processes may run it at once.
func (e *Engine) Migrate(ctx context.Context) error {
	return e.fail(ctx, "migrate", e.migrate(ctx))
}

func (e *Engine) migrate(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, migrateLock); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(e.pool), &rivermigrate.Config{
		Logger: slogmin.New(e.cfg.Logger.Handler(), slog.LevelWarn), Schema: e.cfg.Schema})
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
	for _, q := range tables {
		if _, err := tx.Exec(ctx, e.sql(q)); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// pgTime is t as PostgreSQL keeps it: UTC, to the microsecond.
func pgTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Microsecond)
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = pgTime(t)
	return &t
}

func (e *Engine) now() time.Time { return pgTime(e.cfg.Clock.Now()) }

// PutResult implements delegate.Results.
func (e *Engine) PutResult(ctx context.Context, r delegate.Result) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return err
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = e.now()
	}
	usage, err := json.Marshal(r.Usage)
	if err != nil {
		return err
	}
	tag, err := e.pool.Exec(ctx, e.sql(`INSERT INTO {results}
		(tenant_id, id, conversation_id, graph_id, task_id, skill, text, status, usage, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`),
		r.TenantID, r.ID, r.ConversationID, r.GraphID, r.TaskID, r.Skill, r.Text, string(r.Status), string(usage), pgTime(r.CreatedAt))
	if err != nil {
		return e.fail(ctx, "put result", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: result %q", delegate.ErrExists, r.ID)
	}
	return nil
}

// Result implements delegate.Results.
func (e *Engine) Result(ctx context.Context, tenantID, id string) (delegate.Result, error) {
	if !storable(tenantID) || !storable(id) {
		return delegate.Result{}, fmt.Errorf("%w: result %q", delegate.ErrNotFound, strings.ToValidUTF8(id, "?"))
	}
	rs, err := e.results(ctx, e.pool, tenantID, []string{id})
	if err != nil {
		return delegate.Result{}, err
	}
	if len(rs) == 0 {
		return delegate.Result{}, fmt.Errorf("%w: result %q", delegate.ErrNotFound, id)
	}
	return rs[0], nil
}

// storable reports whether PostgreSQL's text can hold s (UTF-8 without
// NUL): a lookup by an id that is not finds nothing, rather than failing
// as the database would.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func (e *Engine) results(ctx context.Context, db querier, tenantID string, ids []string) ([]delegate.Result, error) {
	rows, err := db.Query(ctx, e.sql(`SELECT id, conversation_id, graph_id, task_id, skill, text, status, usage, created_at
		FROM {results} WHERE tenant_id = $1 AND id = ANY($2)`), tenantID, ids)
	if err != nil {
		return nil, e.fail(ctx, "result", err)
	}
	defer rows.Close()
	var out []delegate.Result
	for rows.Next() {
		r := delegate.Result{TenantID: tenantID}
		var status string
		var usage []byte
		if err := rows.Scan(&r.ID, &r.ConversationID, &r.GraphID, &r.TaskID, &r.Skill, &r.Text, &status, &usage, &r.CreatedAt); err != nil {
			return nil, e.fail(ctx, "result", err)
		}
		r.Status = delegate.ResultStatus(status)
		if err := json.Unmarshal(usage, &r.Usage); err != nil {
			return nil, e.fail(ctx, "result", err)
		}
		r.CreatedAt = r.CreatedAt.UTC()
		out = append(out, r)
	}
	return out, e.fail(ctx, "result", rows.Err())
}

// Forget implements delegate.Engine: the conversation's results and
// graphs (their tasks and edges with them) are deleted in one
// transaction; the River jobs left of them find nothing and end.
func (e *Engine) Forget(ctx context.Context, tenantID, conversationID string) error {
	if !storable(tenantID) || !storable(conversationID) {
		return nil // nothing stored can be under it
	}
	var err error
	for range 3 { // again when PostgreSQL broke a deadlock with a task's end by failing it
		if err = e.forget(ctx, tenantID, conversationID); !isDeadlock(err) {
			break
		}
	}
	return e.fail(ctx, "forget", err)
}

// isDeadlock reports whether err is PostgreSQL's deadlock_detected.
func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

func (e *Engine) forget(ctx context.Context, tenantID, conversationID string) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		// The tasks first, then the graphs, in the order a task's end
		// locks them (no deadlock with one): deleting a task waits for
		// its end under way, whose result the last statement, reading
		// what committed since, then deletes too.
		for _, q := range []string{
			`DELETE FROM {tasks} WHERE tenant_id = $1 AND graph_id IN (SELECT id FROM {graphs} WHERE tenant_id = $1 AND conversation_id = $2)`,
			`DELETE FROM {graphs} WHERE tenant_id = $1 AND conversation_id = $2`,
			`DELETE FROM {results} WHERE tenant_id = $1 AND conversation_id = $2`,
		} {
			if _, err := tx.Exec(ctx, e.sql(q), tenantID, conversationID); err != nil {
				return err
			}
		}
		return nil
	})
}

// Cancel implements delegate.Canceller. In one transaction the
// conversation's running graphs and their tasks not yet ended are marked
// cancelled and their task jobs cancelled (River's JobCancelTx): a job
// still queued never runs, and one under way — in this process or on
// another replica on the same schema, whether or not this engine's Run
// is running — has its ctx cancelled by River once the transaction
// commits (LISTEN/NOTIFY, or River's poll when that is missed); its
// worker then drops the output, and River neither retries the job nor
// does a restart queue it again.
func (e *Engine) Cancel(ctx context.Context, tenantID, conversationID string) (int, error) {
	if !storable(tenantID) || !storable(conversationID) {
		return 0, nil // nothing stored can be under it
	}
	var n int
	var err error
	for range 3 { // again when PostgreSQL broke a deadlock with a task's end by failing it
		if n, err = e.cancel(ctx, tenantID, conversationID); !isDeadlock(err) {
			break
		}
	}
	return n, e.fail(ctx, "cancel", err)
}

func (e *Engine) cancel(ctx context.Context, tenantID, conversationID string) (int, error) {
	var ids []string
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		ids = ids[:0]
		now := e.now()
		// The tasks first, then the graphs, in the order a task's end
		// locks them: an end under way is waited for, and its task then
		// left as it ended.
		if _, err := tx.Exec(ctx, e.sql(`UPDATE {tasks} SET status = 'cancelled', error = $3, ended_at = $4
			WHERE tenant_id = $1 AND status NOT IN ('completed', 'failed', 'blocked', 'cancelled')
			  AND graph_id IN (SELECT id FROM {graphs} WHERE tenant_id = $1 AND conversation_id = $2 AND status = 'running')`),
			tenantID, conversationID, delegate.CancelledError, now); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, e.sql(`UPDATE {graphs} SET status = 'cancelled', ended_at = $3
			WHERE tenant_id = $1 AND conversation_id = $2 AND status = 'running' RETURNING id`), tenantID, conversationID, now)
		if err != nil {
			return err
		}
		if ids, err = pgx.AppendRows(ids, rows, pgx.RowTo[string]); err != nil || len(ids) == 0 {
			return err
		}
		rows, err = tx.Query(ctx, e.sql(`SELECT id FROM {jobs} WHERE kind = $1
			AND state NOT IN ('completed', 'cancelled', 'discarded')
			AND args->>'tenant_id' = $2 AND args->>'graph_id' = ANY($3)`), TaskJobKind, tenantID, ids)
		if err != nil {
			return err
		}
		jobs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, id := range jobs {
			if _, err := e.client.JobCancelTx(ctx, tx, id); err != nil && !errors.Is(err, river.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(ids), nil
}

// Submit implements delegate.Engine: the graph, its tasks and its edges
// are written, and a River job queued for each task without
// dependencies, in one transaction.
func (e *Engine) Submit(ctx context.Context, g delegate.Graph) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	g = g.Clone()
	if err := g.Check(); err != nil {
		return err
	}
	now := e.now()
	bud, err := json.Marshal(g.Budget)
	if err != nil {
		return err
	}
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, e.sql(`INSERT INTO {graphs}
			(tenant_id, id, conversation_id, model, budget, status, consumed, tasks_left, created_at)
			VALUES ($1, $2, $3, $4, $5, 'running', '{}', $6, $7) ON CONFLICT DO NOTHING`),
			g.TenantID, g.ID, g.ConversationID, g.Model, string(bud), len(g.Tasks), now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%w: graph %q", delegate.ErrExists, g.ID)
		}
		taskRows := make([][]any, len(g.Tasks))
		var edgeRows [][]any
		var roots []river.InsertManyParams
		for i, t := range g.Tasks {
			deps := t.DependsOn
			if deps == nil {
				deps = []string{}
			}
			taskRows[i] = []any{g.TenantID, g.ID, t.ID, i, t.Skill, t.Task, t.Context, deps, len(deps), string(delegate.TaskPending)}
			for _, d := range deps {
				edgeRows = append(edgeRows, []any{g.TenantID, g.ID, d, t.ID})
			}
			if len(deps) == 0 {
				roots = append(roots, e.taskJob(g.TenantID, g.ID, t.ID))
			}
		}
		if _, err := tx.CopyFrom(ctx, e.ident("valet_delegate_tasks"),
			[]string{"tenant_id", "graph_id", "id", "seq", "skill", "task", "context", "depends_on", "waiting", "status"},
			pgx.CopyFromRows(taskRows)); err != nil {
			return err
		}
		if len(edgeRows) > 0 {
			if _, err := tx.CopyFrom(ctx, e.ident("valet_delegate_edges"), []string{"tenant_id", "graph_id", "dep", "task"},
				pgx.CopyFromRows(edgeRows)); err != nil {
				return err
			}
		}
		_, err = e.client.InsertManyTx(ctx, tx, roots)
		return err
	})
	return e.fail(ctx, "submit", err)
}

func (e *Engine) ident(table string) pgx.Identifier {
	if e.cfg.Schema == "" {
		return pgx.Identifier{table}
	}
	return pgx.Identifier{e.cfg.Schema, table}
}

// Graph implements delegate.Engine.
func (e *Engine) Graph(ctx context.Context, tenantID, id string) (delegate.Graph, error) {
	if !storable(tenantID) || !storable(id) {
		return delegate.Graph{}, fmt.Errorf("%w: graph %q", delegate.ErrNotFound, strings.ToValidUTF8(id, "?"))
	}
	g, err := e.loadGraph(ctx, e.pool, tenantID, id, false)
	if err != nil {
		return delegate.Graph{}, err
	}
	rows, err := e.pool.Query(ctx, e.sql(`SELECT id, skill, task, context, depends_on, status, result_id, error, attempts, started_at, ended_at
		FROM {tasks} WHERE tenant_id = $1 AND graph_id = $2 ORDER BY seq`), tenantID, id)
	if err != nil {
		return delegate.Graph{}, e.fail(ctx, "graph", err)
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return delegate.Graph{}, e.fail(ctx, "graph", err)
		}
		g.Tasks = append(g.Tasks, t)
	}
	return g, e.fail(ctx, "graph", rows.Err())
}

func scanTask(row pgx.Row) (delegate.Task, error) {
	var t delegate.Task
	var status string
	var started, ended *time.Time
	if err := row.Scan(&t.ID, &t.Skill, &t.Task, &t.Context, &t.DependsOn, &status, &t.ResultID, &t.Error, &t.Attempts, &started, &ended); err != nil {
		return t, err
	}
	if len(t.DependsOn) == 0 {
		t.DependsOn = nil
	}
	t.Status = delegate.TaskStatus(status)
	if started != nil {
		t.StartedAt = started.UTC()
	}
	if ended != nil {
		t.EndedAt = ended.UTC()
	}
	return t, nil
}

// loadGraph reads a graph's row, without its tasks; lock holds it FOR
// UPDATE in a transaction.
func (e *Engine) loadGraph(ctx context.Context, db querier, tenantID, id string, lock bool) (delegate.Graph, error) {
	if err := ctx.Err(); err != nil {
		return delegate.Graph{}, err
	}
	q := `SELECT conversation_id, model, budget, status, consumed, delivered, created_at, ended_at
		FROM {graphs} WHERE tenant_id = $1 AND id = $2`
	if lock {
		q += ` FOR UPDATE`
	}
	g := delegate.Graph{ID: id, TenantID: tenantID}
	var bud, consumed []byte
	var status string
	var ended *time.Time
	err := db.QueryRow(ctx, e.sql(q), tenantID, id).Scan(&g.ConversationID, &g.Model, &bud, &status, &consumed, &g.Delivered, &g.CreatedAt, &ended)
	if errors.Is(err, pgx.ErrNoRows) {
		return g, fmt.Errorf("%w: graph %q", delegate.ErrNotFound, id)
	}
	if err != nil {
		return g, e.fail(ctx, "graph", err)
	}
	if err := json.Unmarshal(bud, &g.Budget); err != nil {
		return g, e.fail(ctx, "graph", err)
	}
	if err := json.Unmarshal(consumed, &g.Consumed); err != nil {
		return g, e.fail(ctx, "graph", err)
	}
	g.Status = delegate.GraphStatus(status)
	g.CreatedAt = g.CreatedAt.UTC()
	if ended != nil {
		g.EndedAt = ended.UTC()
	}
	return g, nil
}

// Run implements delegate.Engine: it queues the delivery of every ended
// graph not yet delivered and a job for every ready task whose job is
// gone (River dedups those still queued), then starts the River client,
// which works the queue's jobs through exec until ctx ends; it then stops
// the client, cancelling the runs under way (their jobs are snoozed, to
// run again at once on the next start, or on another replica), and
// returns nil. One Run at a time per Engine (ErrRunning).
func (e *Engine) Run(ctx context.Context, exec delegate.Executor) error {
	if exec == nil {
		return fmt.Errorf("%w: pgdelegate: Run needs an Executor", delegate.ErrInvalid)
	}
	if !e.runMu.TryLock() {
		return delegate.ErrRunning
	}
	defer e.runMu.Unlock()
	e.exec.Store(&exec)
	defer e.exec.Store(nil)
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		err := e.requeue(ctx)
		if err == nil {
			err = e.client.Start(context.WithoutCancel(ctx))
		}
		if err == nil {
			break
		}
		e.cfg.Logger.Error("pgdelegate: starting; trying again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	<-ctx.Done()
	e.stopping.Store(true)
	defer e.stopping.Store(false)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := e.client.StopAndCancel(sctx); err != nil {
		e.cfg.Logger.Error("pgdelegate: stopping River", "err", err)
	}
	return nil
}

// requeue queues the deliveries of ended, undelivered graphs and the
// jobs of ready tasks of running graphs; River's unique jobs drop those
// already queued.
func (e *Engine) requeue(ctx context.Context) error {
	return e.inTx(ctx, func(tx pgx.Tx) error {
		var params []river.InsertManyParams
		rows, err := tx.Query(ctx, e.sql(`SELECT tenant_id, id FROM {graphs} WHERE status <> 'running' AND status <> 'cancelled' AND NOT delivered`))
		if err != nil {
			return err
		}
		for rows.Next() {
			var tenant, id string
			if err := rows.Scan(&tenant, &id); err != nil {
				return err
			}
			params = append(params, e.deliverJob(tenant, id))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, e.sql(`SELECT t.tenant_id, t.graph_id, t.id FROM {tasks} t
			JOIN {graphs} g ON g.tenant_id = t.tenant_id AND g.id = t.graph_id
			WHERE g.status = 'running' AND t.waiting = 0 AND t.status IN ('pending', 'running')`))
		if err != nil {
			return err
		}
		for rows.Next() {
			var tenant, graph, id string
			if err := rows.Scan(&tenant, &graph, &id); err != nil {
				return err
			}
			params = append(params, e.taskJob(tenant, graph, id))
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(params) == 0 {
			return nil
		}
		_, err = e.client.InsertManyTx(ctx, tx, params)
		return err
	})
}

func (e *Engine) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
	}()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// fail gives an error its context: the operation, a hint to run Migrate
// for a missing table, and ctx's error when it ended. delegate's
// sentinels stay errors.Is-visible.
func (e *Engine) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, delegate.ErrNotFound) || errors.Is(err, delegate.ErrExists) || errors.Is(err, delegate.ErrInvalid) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		err = fmt.Errorf("%w (run Migrate first)", err)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	return fmt.Errorf("pgdelegate: %s: %w", op, err)
}
