package pgdelegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/budget"
)

// taskArgs are a task's job arguments: unique by tenant, graph and task
// (River's unique jobs, in every state but cancelled and discarded), so a
// task is queued once however many transactions or replicas queue it.
type taskArgs struct {
	TenantID string `json:"tenant_id" river:"unique"`
	GraphID  string `json:"graph_id" river:"unique"`
	TaskID   string `json:"task_id" river:"unique"`
}

func (taskArgs) Kind() string { return TaskJobKind }

// deliverArgs are a graph's delivery job arguments, unique by tenant and
// graph.
type deliverArgs struct {
	TenantID string `json:"tenant_id" river:"unique"`
	GraphID  string `json:"graph_id" river:"unique"`
}

func (deliverArgs) Kind() string { return DeliverJobKind }

// pruneArgs are the periodic pruning job's.
type pruneArgs struct{}

func (pruneArgs) Kind() string { return PruneJobKind }

func (e *Engine) taskJob(tenant, graph, task string) river.InsertManyParams {
	return river.InsertManyParams{Args: taskArgs{tenant, graph, task}, InsertOpts: &river.InsertOpts{
		Queue: e.cfg.Queue, MaxAttempts: e.cfg.MaxAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}}
}

func (e *Engine) deliverJob(tenant, graph string) river.InsertManyParams {
	return river.InsertManyParams{Args: deliverArgs{tenant, graph}, InsertOpts: &river.InsertOpts{
		Queue: e.cfg.Queue, MaxAttempts: e.cfg.DeliverAttempts, UniqueOpts: river.UniqueOpts{ByArgs: true}}}
}

func (e *Engine) nextRetry(attempt int) time.Time {
	return time.Now().Add(delegate.RetryDelay(e.cfg.RetryDelay, e.cfg.MaxRetryDelay, attempt))
}

type taskWorker struct {
	river.WorkerDefaults[taskArgs]
	e *Engine
}

// NextRetry is RetryDelay, doubling with each attempt up to MaxRetryDelay.
func (w *taskWorker) NextRetry(job *river.Job[taskArgs]) time.Time { return w.e.nextRetry(job.Attempt) }

// Work runs one attempt of a task's job.
func (w *taskWorker) Work(ctx context.Context, job *river.Job[taskArgs]) error {
	e := w.e
	ep := e.exec.Load()
	if ep == nil {
		return river.JobSnooze(time.Second) // not running: should not happen
	}
	exec := *ep
	a := job.Args
	g, err := e.loadGraph(ctx, e.pool, a.TenantID, a.GraphID, false)
	if errors.Is(err, delegate.ErrNotFound) {
		return nil // pruned
	}
	if err != nil {
		return err
	}
	if g.Status != delegate.GraphRunning {
		return nil
	}
	t, err := scanTask(e.pool.QueryRow(ctx, e.sql(`SELECT id, skill, task, context, depends_on, status, result_id, error, attempts, started_at, ended_at
		FROM {tasks} WHERE tenant_id = $1 AND graph_id = $2 AND id = $3`), a.TenantID, a.GraphID, a.TaskID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return e.fail(ctx, "task", err)
	}
	if t.Status.Ended() {
		return nil // a run already ended it
	}
	now := e.now()
	busy := false
	// A capped graph runs one task at a time (delegate.OneAtATime): with
	// the graph's row held, the task starts only when no other of its
	// tasks runs, on the Consumed the ones before it left.
	err = e.inTx(ctx, func(tx pgx.Tx) error {
		if delegate.OneAtATime(g.Budget) {
			lg, err := e.loadGraph(ctx, tx, a.TenantID, a.GraphID, true)
			if err != nil {
				return err
			}
			g.Consumed = lg.Consumed
			if err := tx.QueryRow(ctx, e.sql(`SELECT EXISTS (SELECT 1 FROM {tasks}
				WHERE tenant_id = $1 AND graph_id = $2 AND id <> $3 AND status = 'running')`),
				a.TenantID, a.GraphID, a.TaskID).Scan(&busy); err != nil || busy {
				return err
			}
		}
		spent := g.Consumed
		spent.Wall = now.Sub(g.CreatedAt)
		if delegate.Spent(g.Budget, spent) != "" {
			return nil // endTask below, outside this transaction
		}
		tag, err := tx.Exec(ctx, e.sql(`UPDATE {tasks} SET status = 'running', started_at = $4
			WHERE tenant_id = $1 AND graph_id = $2 AND id = $3 AND status IN ('pending', 'running')`),
			a.TenantID, a.GraphID, a.TaskID, now)
		if err == nil && tag.RowsAffected() == 0 {
			return delegate.ErrNotFound // ended meanwhile (cancelled)
		}
		return err
	})
	if errors.Is(err, delegate.ErrNotFound) {
		return nil // forgotten, pruned or cancelled meanwhile
	}
	if err != nil {
		return e.fail(ctx, "task", err)
	}
	if busy {
		return river.JobSnooze(e.cfg.RetryDelay) // its graph runs another task: wait for it
	}
	spent := g.Consumed
	spent.Wall = now.Sub(g.CreatedAt)
	if why := delegate.Spent(g.Budget, spent); why != "" {
		return e.endTask(ctx, job, nil, why)
	}
	t.Status, t.StartedAt = delegate.TaskRunning, now
	ids := make([]string, len(t.DependsOn))
	for i, d := range t.DependsOn {
		ids[i] = delegate.ResultID(g.ID, d)
	}
	rs, err := e.results(ctx, e.pool, a.TenantID, ids)
	if err != nil {
		return err
	}
	deps := make(map[string]delegate.Result, len(rs))
	for _, r := range rs {
		deps[r.TaskID] = r
	}
	g.Tasks = []delegate.Task{t}
	tc := t
	out, err := runTask(ctx, exec, &g, &tc, deps)
	if err == nil {
		// The run is done: keep its output even when the engine is
		// stopping meanwhile (a sub-agent's run is costly to redo).
		ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
		defer cancel()
		return e.endTask(ectx, job, &out, "")
	}
	if ctx.Err() != nil && e.stopping.Load() {
		// Cut short by the engine stopping: run it again at once on the
		// next start, without using an attempt.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_, _ = e.pool.Exec(rctx, e.sql(`UPDATE {tasks} SET status = 'pending'
			WHERE tenant_id = $1 AND graph_id = $2 AND id = $3 AND status = 'running'`), a.TenantID, a.GraphID, a.TaskID)
		return river.JobSnooze(0)
	}
	if job.Attempt >= job.MaxAttempts {
		return e.endTask(ctx, job, nil, fmt.Sprintf("its run failed %d times: %s", job.Attempt, delegate.ErrorLine(err)))
	}
	if _, uerr := e.pool.Exec(ctx, e.sql(`UPDATE {tasks} SET status = 'pending', attempts = $4
		WHERE tenant_id = $1 AND graph_id = $2 AND id = $3 AND status = 'running'`),
		a.TenantID, a.GraphID, a.TaskID, job.Attempt); uerr != nil {
		return errors.Join(err, e.fail(ctx, "task", uerr))
	}
	return err
}

// endTask ends the job's task in one transaction holding the graph's row:
// with out, its result is stored and the task completed (or failed, when
// out says the sub-agent failed) and the dependants it made ready queued;
// without, the task failed for why. A failed task's dependants are
// blocked, transitively; when no task is left the graph ends and its
// delivery is queued. The job is completed in the same transaction.
func (e *Engine) endTask(ctx context.Context, job *river.Job[taskArgs], out *delegate.Output, why string) error {
	a := job.Args
	err := e.inTx(ctx, func(tx pgx.Tx) error {
		// The task's row is held: another run of it (a rescued job) waits
		// here and then finds it ended. The graph's row is updated last,
		// so the ends of a graph's tasks overlap but for that statement.
		var status, skill, conv string
		err := tx.QueryRow(ctx, e.sql(`SELECT t.status, t.skill, g.conversation_id FROM {tasks} t
			JOIN {graphs} g ON g.tenant_id = t.tenant_id AND g.id = t.graph_id
			WHERE t.tenant_id = $1 AND t.graph_id = $2 AND t.id = $3 FOR UPDATE OF t`),
			a.TenantID, a.GraphID, a.TaskID).Scan(&status, &skill, &conv)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && delegate.TaskStatus(status).Ended() {
			return e.completeJob(ctx, tx, job) // pruned, or ended by another run of it
		}
		if err != nil {
			return err
		}
		var used budget.Consumed
		now := e.now()
		var jobs []river.InsertManyParams
		left := 0
		resultID := ""
		if out != nil {
			o := out.Clean()
			resultID = delegate.ResultID(a.GraphID, a.TaskID)
			usage, err := json.Marshal(o.Usage)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, e.sql(`INSERT INTO {results}
				(tenant_id, id, conversation_id, graph_id, task_id, skill, text, status, usage, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
				ON CONFLICT (tenant_id, id) DO UPDATE SET conversation_id = $3, graph_id = $4, task_id = $5,
					skill = $6, text = $7, status = $8, usage = $9, created_at = $10`),
				a.TenantID, resultID, conv, a.GraphID, a.TaskID, skill, o.Text, string(o.Status), string(usage), now); err != nil {
				return err
			}
			used = o.Usage
			if o.Status == delegate.ResultFailed {
				why = "the sub-agent failed"
			}
		}
		if why == "" {
			if _, err := tx.Exec(ctx, e.sql(`UPDATE {tasks} SET status = 'completed', result_id = $4, ended_at = $5, attempts = $6
				WHERE tenant_id = $1 AND graph_id = $2 AND id = $3`), a.TenantID, a.GraphID, a.TaskID, resultID, now, job.Attempt-1); err != nil {
				return err
			}
			left = 1
			// The dependants' rows are locked in id order, as every end
			// of a task does, so that two ends cannot deadlock.
			if _, err := tx.Exec(ctx, e.sql(`SELECT 1 FROM {tasks} WHERE tenant_id = $1 AND graph_id = $2
				AND id IN (SELECT task FROM {edges} WHERE tenant_id = $1 AND graph_id = $2 AND dep = $3)
				ORDER BY id FOR UPDATE`), a.TenantID, a.GraphID, a.TaskID); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, e.sql(`UPDATE {tasks} t SET waiting = waiting - 1
				FROM {edges} d
				WHERE d.tenant_id = $1 AND d.graph_id = $2 AND d.dep = $3
				  AND t.tenant_id = d.tenant_id AND t.graph_id = d.graph_id AND t.id = d.task
				RETURNING t.id, t.waiting, t.status`), a.TenantID, a.GraphID, a.TaskID)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id, st string
				var waiting int
				if err := rows.Scan(&id, &waiting, &st); err != nil {
					rows.Close()
					return err
				}
				if waiting == 0 && st == string(delegate.TaskPending) {
					jobs = append(jobs, e.taskJob(a.TenantID, a.GraphID, id))
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
		} else {
			if _, err := tx.Exec(ctx, e.sql(`UPDATE {tasks} SET status = 'failed', result_id = $4, error = $5, ended_at = $6, attempts = $7
				WHERE tenant_id = $1 AND graph_id = $2 AND id = $3`), a.TenantID, a.GraphID, a.TaskID, resultID, why, now, job.Attempt); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, e.sql(`WITH RECURSIVE down(id) AS (
					SELECT task FROM {edges} WHERE tenant_id = $1 AND graph_id = $2 AND dep = $3
					UNION
					SELECT d.task FROM {edges} d JOIN down ON d.dep = down.id WHERE d.tenant_id = $1 AND d.graph_id = $2)
				SELECT 1 FROM {tasks} WHERE tenant_id = $1 AND graph_id = $2 AND id IN (SELECT id FROM down)
				ORDER BY id FOR UPDATE`), a.TenantID, a.GraphID, a.TaskID); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, e.sql(`WITH RECURSIVE down(id) AS (
					SELECT task FROM {edges} WHERE tenant_id = $1 AND graph_id = $2 AND dep = $3
					UNION
					SELECT d.task FROM {edges} d JOIN down ON d.dep = down.id WHERE d.tenant_id = $1 AND d.graph_id = $2)
				UPDATE {tasks} SET status = 'blocked', error = $4, ended_at = $5
				WHERE tenant_id = $1 AND graph_id = $2 AND id IN (SELECT id FROM down)
				  AND status NOT IN ('completed', 'failed', 'blocked')`),
				a.TenantID, a.GraphID, a.TaskID, fmt.Sprintf("blocked: task %q it depends on failed", a.TaskID), now)
			if err != nil {
				return err
			}
			left = 1 + int(tag.RowsAffected())
		}
		// Decrementing tasks_left is atomic: the end that brings it to 0,
		// after every other end committed, ends the graph.
		var remaining int
		if err := tx.QueryRow(ctx, e.sql(`UPDATE {graphs} SET tasks_left = tasks_left - $3,
				consumed = jsonb_build_object(
					'tokens', COALESCE((consumed->>'tokens')::bigint, 0) + $4,
					'cost_usd', COALESCE((consumed->>'cost_usd')::float8, 0) + $5,
					'wall', COALESCE((consumed->>'wall')::bigint, 0) + $6,
					'tool_calls', COALESCE((consumed->>'tool_calls')::bigint, 0) + $7)
			WHERE tenant_id = $1 AND id = $2 RETURNING tasks_left`),
			a.TenantID, a.GraphID, left, used.Tokens, used.CostUSD, int64(used.Wall), used.ToolCalls).Scan(&remaining); err != nil {
			return err
		}
		if remaining <= 0 {
			if _, err := tx.Exec(ctx, e.sql(`UPDATE {graphs} SET ended_at = $3,
				status = CASE WHEN EXISTS (SELECT 1 FROM {tasks} WHERE tenant_id = $1 AND graph_id = $2 AND status <> 'completed')
					THEN 'failed' ELSE 'completed' END
				WHERE tenant_id = $1 AND id = $2`), a.TenantID, a.GraphID, now); err != nil {
				return err
			}
			jobs = append(jobs, e.deliverJob(a.TenantID, a.GraphID))
		}
		if len(jobs) > 0 {
			if _, err := e.client.InsertManyTx(ctx, tx, jobs); err != nil {
				return err
			}
		}
		return e.completeJob(ctx, tx, job)
	})
	return e.fail(ctx, "ending task", err)
}

func (e *Engine) completeJob(ctx context.Context, tx pgx.Tx, job *river.Job[taskArgs]) error {
	_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
	return err
}

type deliverWorker struct {
	river.WorkerDefaults[deliverArgs]
	e *Engine
}

// NextRetry is RetryDelay, doubling with each attempt up to MaxRetryDelay.
func (w *deliverWorker) NextRetry(job *river.Job[deliverArgs]) time.Time {
	return w.e.nextRetry(job.Attempt)
}

// Work delivers an ended graph, and marks it delivered with the job's
// completion in one transaction.
func (w *deliverWorker) Work(ctx context.Context, job *river.Job[deliverArgs]) error {
	e := w.e
	ep := e.exec.Load()
	if ep == nil {
		return river.JobSnooze(time.Second)
	}
	g, err := e.Graph(ctx, job.Args.TenantID, job.Args.GraphID)
	if errors.Is(err, delegate.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if g.Delivered || g.Status == delegate.GraphRunning || g.Status == delegate.GraphCancelled {
		return nil
	}
	if err := deliver(ctx, *ep, &g); err != nil {
		if ctx.Err() != nil && e.stopping.Load() {
			return river.JobSnooze(0)
		}
		if job.Attempt >= job.MaxAttempts {
			// Past its attempts the delivery is not given up while the
			// engine runs (an outage may outlast them): snoozed, which
			// River does not count as an attempt, every MaxRetryDelay.
			e.cfg.Logger.WarnContext(ctx, "pgdelegate: a graph's delivery keeps failing; trying again",
				"graph", g.ID, "attempts", job.Attempt, "err", delegate.ErrorLine(err))
			return river.JobSnooze(e.cfg.MaxRetryDelay)
		}
		return err
	}
	// Delivered: record it even when the engine is stopping meanwhile.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	return e.fail(ctx, "delivered", e.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, e.sql(`UPDATE {graphs} SET delivered = true WHERE tenant_id = $1 AND id = $2`),
			job.Args.TenantID, job.Args.GraphID); err != nil {
			return err
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	}))
}

type pruneWorker struct {
	river.WorkerDefaults[pruneArgs]
	e *Engine
}

// Work drops the delivered graphs that ended more than Retention ago,
// with their tasks, and the results older than that whose graph is gone.
func (w *pruneWorker) Work(ctx context.Context, job *river.Job[pruneArgs]) error {
	return w.e.Prune(ctx)
}

// Prune drops the delivered and the cancelled graphs that ended more than Config.Retention
// ago (by Config.Clock), with their tasks, and the results stored before
// then whose graph is gone. A River periodic job calls it while Run runs
// (at start, then every Retention or hour, whichever is shorter).
func (e *Engine) Prune(ctx context.Context) error {
	cut := e.now().Add(-e.cfg.Retention)
	return e.fail(ctx, "prune", e.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, e.sql(`DELETE FROM {graphs} WHERE (delivered OR status = 'cancelled') AND ended_at < $1`), cut); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, e.sql(`DELETE FROM {results} r WHERE created_at < $1 AND (graph_id = ''
			OR NOT EXISTS (SELECT 1 FROM {graphs} g WHERE g.tenant_id = r.tenant_id AND g.id = r.graph_id))`), cut)
		return err
	}))
}

// runTask calls exec.RunTask, making a panic an error of the run (so the
// task fails after its attempts, recorded, rather than River discarding
// its job).
func runTask(ctx context.Context, exec delegate.Executor, g *delegate.Graph, t *delegate.Task, deps map[string]delegate.Result) (out delegate.Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = delegate.Output{}, fmt.Errorf("pgdelegate: the executor panicked: %v", p)
		}
	}()
	return exec.RunTask(ctx, g, t, deps)
}

// deliver calls exec.Deliver, making a panic an error of the delivery.
func deliver(ctx context.Context, exec delegate.Executor, g *delegate.Graph) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("pgdelegate: the executor panicked: %v", p)
		}
	}()
	return exec.Deliver(ctx, g)
}
