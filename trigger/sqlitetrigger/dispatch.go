package sqlitetrigger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/valetkit/valet/trigger"
)

// runArgs are a run's job arguments. The job is unique by tenant, task and
// due time (River's unique jobs, in every state but cancelled and
// discarded), so a run is queued once however often it is queued.
//
// The run of an event task has no due time (zero) and is unique by the
// event's ID instead; a chained run, by the run it follows.
type runArgs struct {
	TenantID  string    `json:"tenant_id" river:"unique"`
	TaskID    string    `json:"task_id" river:"unique"`
	DueAt     time.Time `json:"due_at" river:"unique"`
	EventID   string    `json:"event_id,omitempty" river:"unique"`
	PrevRunID string    `json:"prev_run_id,omitempty" river:"unique"`
	// Backoff is the task's Retry.Backoff when the run was queued.
	Backoff  time.Duration     `json:"backoff,omitempty"`
	Event    *trigger.Event    `json:"event,omitempty"`
	Previous *trigger.Previous `json:"previous,omitempty"`
}

func (runArgs) Kind() string { return JobKind }

// due is the run the job of a carries: a one-off run (an event's, a
// chained one) is due when it was queued, created.
func (a runArgs) due(attempt, maxAttempts int, created time.Time) trigger.Due {
	d := trigger.Due{TenantID: a.TenantID, TaskID: a.TaskID, DueAt: a.DueAt,
		Attempt: attempt, MaxAttempts: maxAttempts, Event: a.Event, Previous: a.Previous}
	if d.Event != nil || d.Previous != nil {
		d.DueAt = created
	}
	return d
}

// riverPriority maps a task's Priority (0–9, higher first) onto River's
// four levels (1 first): 8–9 → 1, 5–7 → 2, 2–4 → 3, 0–1 → 4, as
// rivertrigger does.
func riverPriority(p int) int {
	switch {
	case p >= 8:
		return 1
	case p >= 5:
		return 2
	case p >= 2:
		return 3
	}
	return 4
}

// enqueue queues the run of t at its NextRun in tx when t is ACTIVE.
func (s *Store) enqueue(ctx context.Context, tx *sql.Tx, t *trigger.Task) error {
	if t.Status != trigger.StatusActive || t.NextRun.IsZero() {
		return nil
	}
	_, err := s.client.InsertTx(ctx, tx, runArgs{
		TenantID: t.TenantID, TaskID: t.ID, DueAt: sqlTime(t.NextRun), Backoff: t.Retry.Backoff,
	}, &river.InsertOpts{
		Queue:       s.cfg.Queue,
		Priority:    riverPriority(t.Priority),
		MaxAttempts: t.Retry.Attempts(),
		ScheduledAt: sqlTime(t.NextRun),
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	})
	if err != nil {
		return fmt.Errorf("queueing the run: %w", err)
	}
	return nil
}

// Enqueue implements [trigger.Dispatcher.Enqueue]: a one-off run,
// available at once, unique by (tenant, task, event id) or (tenant, task,
// previous run).
func (s *Store) Enqueue(ctx context.Context, d trigger.Due) error {
	args := runArgs{TenantID: d.TenantID, TaskID: d.TaskID}
	switch {
	case d.Event != nil:
		ev := *d.Event
		args.EventID, args.Event = ev.ID, &ev
	case d.Previous != nil:
		prev := *d.Previous
		args.PrevRunID, args.Previous = prev.RunID, &prev
	default:
		return fmt.Errorf("%w: sqlitetrigger: Enqueue of a run without an event or a previous run", trigger.ErrInvalid)
	}
	t, err := s.Get(ctx, d.TenantID, d.TaskID)
	if err != nil {
		return err
	}
	args.Backoff = t.Retry.Backoff
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := s.client.InsertTx(ctx, tx, args, &river.InsertOpts{
			Queue:       s.cfg.Queue,
			Priority:    riverPriority(t.Priority),
			MaxAttempts: t.Retry.Attempts(),
			UniqueOpts:  river.UniqueOpts{ByArgs: true},
		})
		return err
	})
	return s.fail(ctx, "enqueue", err)
}

type jobKey struct{}

// jobFrom returns the job a worker put in ctx, or nil.
func jobFrom(ctx context.Context) *river.Job[runArgs] {
	j, _ := ctx.Value(jobKey{}).(*river.Job[runArgs])
	return j
}

// worker is River's worker of a run's job: it hands the run to the
// engine's HandleDue.
type worker struct {
	river.WorkerDefaults[runArgs]
	s *Store
}

// NextRetry is the task's backoff, doubling with each attempt.
func (w *worker) NextRetry(job *river.Job[runArgs]) time.Time {
	return time.Now().Add(trigger.Retry{Backoff: job.Args.Backoff}.Delay(job.Attempt))
}

// Work carries out one attempt of job's run through the dispatching
// handler and returns what River should do with the job. A stale run
// (task deleted, paused or moved on) is cancelled, so that the same due
// time can be queued again later; an attempt cut short because this
// process is stopping is snoozed, so that it does not count; a conflict
// with a run of the task under way here (RunNow) is tried again shortly.
func (w *worker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	hp := w.s.handler.Load()
	if hp == nil {
		return river.JobSnooze(time.Second) // not dispatching: should not happen
	}
	h := *hp
	s := w.s
	d := job.Args.due(job.Attempt, job.MaxAttempts, job.CreatedAt)
	jctx := context.WithValue(ctx, jobKey{}, job)
	err := h.HandleDue(jctx, d)
	if errors.Is(err, trigger.ErrStale) && d.Event == nil && d.Previous == nil {
		var due bool
		if due, err = s.cancelStale(ctx, job, err); due {
			err = h.HandleDue(jctx, d)
		}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, trigger.ErrStale):
		return river.JobCancel(err)
	case ctx.Err() != nil && s.stopping.Load():
		return river.JobSnooze(0)
	case errors.Is(err, trigger.ErrConflict):
		return river.JobSnooze(time.Second)
	}
	return err
}

// cancelStale cancels the running job of a stale run in a transaction,
// unless the task is due at the job's time after all (due): a Resume
// committed meanwhile wants this very run (its own insert was dropped as
// a duplicate of this job). Finalizing the job here, rather than when
// River finalizes it after Work returns, frees its unique key before a
// Resume can look for it.
func (s *Store) cancelStale(ctx context.Context, job *river.Job[runArgs], stale error) (due bool, err error) {
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var status string
		var next sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT status, next_run FROM valet_trigger_tasks
			WHERE tenant_id = ? AND id = ?`, job.Args.TenantID, job.Args.TaskID).Scan(&status, &next)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err == nil && status == string(trigger.StatusActive) && next.Valid && next.Int64 == job.Args.DueAt.UnixMilli() {
			due = true
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE river_job SET state = 'cancelled', finalized_at = datetime('now', 'subsec'),
			errors = jsonb(json_insert(json(coalesce(errors, jsonb('[]'))), '$[#]',
				json_object('at', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 'attempt', attempt, 'error', ?2)))
			WHERE id = ?1 AND state = 'running'`, job.ID, stale.Error())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("%w (cancelling its job: %w)", stale, err)
	}
	return due, stale
}

// Dispatch implements [trigger.Dispatcher.Dispatch]: it takes the file's
// dispatch lock (ErrDispatching when another process holds it), starts
// the River client, which works the queue's runs through h, and a
// reconciler that hands h.HandleLost the runs River discarded without h
// recording their end (a job rescued from a dead worker on its last
// attempt). When ctx ends it stops the client, cancelling the runs under
// way, waits for them and lets the lock go. One Dispatch at a time per
// Store.
func (s *Store) Dispatch(ctx context.Context, h trigger.DueHandler) error {
	if h == nil {
		return fmt.Errorf("%w: sqlitetrigger: Dispatch needs a DueHandler", trigger.ErrInvalid)
	}
	if !s.dispatchMu.TryLock() {
		return errors.New("sqlitetrigger: Dispatch is already running on this Store")
	}
	defer s.dispatchMu.Unlock()
	unlock, err := s.lockDispatch(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	s.handler.Store(&h)
	defer s.handler.Store(nil)
	if err := s.client.Start(context.WithoutCancel(ctx)); err != nil {
		return s.fail(ctx, "dispatch", fmt.Errorf("starting River: %w", err))
	}
	var wg sync.WaitGroup
	rctx, stopReconciler := context.WithCancel(ctx)
	wg.Go(func() { s.reconcile(rctx, h) })
	<-ctx.Done()
	s.stopping.Store(true)
	defer s.stopping.Store(false)
	stopReconciler()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := s.client.StopAndCancel(sctx); err != nil {
		s.log.Error("sqlitetrigger: stopping River", "err", err)
	}
	wg.Wait()
	return nil
}

// reconcile looks, every ReconcileInterval, at the queue's jobs River
// discarded since it last looked, and hands each to h.HandleLost, which
// does nothing when valet already recorded the run's end.
func (s *Store) reconcile(ctx context.Context, h trigger.DueHandler) {
	since := time.Now().Add(-7 * 24 * time.Hour) // River keeps discarded jobs a week by default
	tick := time.NewTicker(s.cfg.ReconcileInterval)
	defer tick.Stop()
	for {
		next, err := s.reconcileOnce(ctx, h, since)
		if err != nil && ctx.Err() == nil {
			s.log.Error("sqlitetrigger: reconciling discarded runs", "err", err)
		}
		since = next
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

const (
	reconcilePage = 500
	// reconcileOverlap is how far back each pass looks again before the
	// newest finalized_at it saw.
	reconcileOverlap = 10 * time.Minute
	// riverTime is the text River's SQLite driver keeps times in.
	riverTime = "2006-01-02 15:04:05.000"
)

type lostJob struct {
	id        int64
	args      []byte
	attempt   int
	max       int
	finalized string
	created   string
	reason    string
}

// reconcileOnce hands h the discarded jobs finalized since since minus
// reconcileOverlap, page by page, and returns the newest finalized_at it
// saw.
func (s *Store) reconcileOnce(ctx context.Context, h trigger.DueHandler, since time.Time) (time.Time, error) {
	newest := since
	afterAt, afterID := since.Add(-reconcileOverlap).UTC().Format(riverTime), int64(0)
	for {
		page, err := s.lostPage(ctx, afterAt, afterID)
		if err != nil {
			return newest, err
		}
		for _, l := range page {
			afterAt, afterID = l.finalized, l.id
			if f, err := time.Parse(riverTime, l.finalized); err == nil && f.After(newest) {
				newest = f
			}
			var a runArgs
			if err := json.Unmarshal(l.args, &a); err != nil {
				s.log.Error("sqlitetrigger: a discarded job's args", "job", l.id, "err", err)
				continue
			}
			created, _ := time.Parse(riverTime, l.created)
			d := a.due(l.attempt, l.max, created)
			reason := "discarded by River"
			if l.reason != "" {
				reason += ": " + l.reason
			}
			if err := h.HandleLost(ctx, d, reason); err != nil {
				if ctx.Err() != nil {
					return newest, err
				}
				s.log.Error("sqlitetrigger: recording a discarded run", "job", l.id,
					"tenant", a.TenantID, "task", a.TaskID, "err", err)
			}
		}
		if len(page) < reconcilePage {
			return newest, nil
		}
	}
}

func (s *Store) lostPage(ctx context.Context, afterAt string, afterID int64) ([]lostJob, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, json(args), attempt, max_attempts,
			strftime('%Y-%m-%d %H:%M:%f', finalized_at), strftime('%Y-%m-%d %H:%M:%f', created_at),
			coalesce(json_extract(errors, '$[#-1].error'), '')
		FROM river_job
		WHERE kind = ?1 AND queue = ?2 AND state = 'discarded' AND (finalized_at, id) > (?3, ?4)
		ORDER BY finalized_at, id LIMIT ?5`, JobKind, s.cfg.Queue, afterAt, afterID, reconcilePage)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var page []lostJob
	for rows.Next() {
		var l lostJob
		if err := rows.Scan(&l.id, &l.args, &l.attempt, &l.max, &l.finalized, &l.created, &l.reason); err != nil {
			return nil, err
		}
		page = append(page, l)
	}
	return page, rows.Err()
}

// chainInTx queues in tx, when r succeeded and t's route chains to an
// ACTIVE task, that task's run after r: the job Enqueue queues for it
// (unique by the run it follows), so that a process dying between the
// record and the engine's delivery along the route loses no chained run.
func (s *Store) chainInTx(ctx context.Context, tx *sql.Tx, r trigger.Run, t *trigger.Task) error {
	if r.Status != trigger.RunSucceeded || t.RouteKind() != trigger.RouteChain {
		return nil
	}
	depth := 0
	if job := jobFrom(ctx); job != nil && job.Args.Previous != nil && job.Args.TaskID == t.ID {
		depth = job.Args.Previous.Depth
	}
	prev := trigger.Previous{TaskID: t.ID, RunID: r.ID, Depth: depth + 1}
	if prev.Depth > trigger.MaxChainDepth {
		return nil
	}
	if t.Route.PassOutput {
		prev.Output = r.Result
	}
	next, err := getTask(ctx, tx, t.TenantID, t.Route.Next, true)
	if errors.Is(err, trigger.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = s.client.InsertTx(ctx, tx, runArgs{
		TenantID: next.TenantID, TaskID: next.ID, PrevRunID: prev.RunID, Previous: &prev, Backoff: next.Retry.Backoff,
	}, &river.InsertOpts{
		Queue:       s.cfg.Queue,
		Priority:    riverPriority(next.Priority),
		MaxAttempts: next.Retry.Attempts(),
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	})
	return err
}
