package rivertrigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/valetkit/valet/trigger"
)

// runArgs are a run's job arguments. The job is unique by tenant, task and
// due time (River's unique jobs, in every state but cancelled and
// discarded), so a run is queued once however many replicas queue it.
//
// The run of an event task has no due time (zero) and is unique by the
// event's ID instead: a redelivered event is queued once (while River
// keeps the completed job, a day by default); a chained run, by the run
// it follows.
type runArgs struct {
	TenantID string    `json:"tenant_id" river:"unique"`
	TaskID   string    `json:"task_id" river:"unique"`
	DueAt    time.Time `json:"due_at" river:"unique"`
	EventID  string    `json:"event_id,omitempty" river:"unique"`
	// PrevRunID is the run a chained run follows (RouteChain).
	PrevRunID string `json:"prev_run_id,omitempty" river:"unique"`
	// Backoff is the task's Retry.Backoff when the run was queued.
	Backoff time.Duration `json:"backoff,omitempty"`
	// Event is the event of an event task's run.
	Event *trigger.Event `json:"event,omitempty"`
	// Previous is what a chained run is told of the run before it.
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

// Priority maps a task's Priority (0–9, higher first) onto River's four
// levels (1 first): 8–9 → 1, 5–7 → 2, 2–4 → 3, 0–1 → 4. River orders the
// runs available at once by level, then by due time; within a level
// valet's finer order is not kept.
func Priority(p int) int {
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
func (s *Store) enqueue(ctx context.Context, tx pgx.Tx, t *trigger.Task) error {
	if t.Status != trigger.StatusActive || t.NextRun.IsZero() {
		return nil
	}
	_, err := s.client.InsertTx(ctx, tx, runArgs{
		TenantID: t.TenantID, TaskID: t.ID, DueAt: pgTime(t.NextRun), Backoff: t.Retry.Backoff,
	}, &river.InsertOpts{
		Queue:       s.cfg.Queue,
		Priority:    Priority(t.Priority),
		MaxAttempts: t.Retry.Attempts(),
		ScheduledAt: t.NextRun,
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
		return fmt.Errorf("%w: rivertrigger: Enqueue of a run without an event or a previous run", trigger.ErrInvalid)
	}
	t, err := s.Get(ctx, d.TenantID, d.TaskID)
	if err != nil {
		return err
	}
	args.Backoff = t.Retry.Backoff
	_, err = s.client.Insert(ctx, args, &river.InsertOpts{
		Queue:       s.cfg.Queue,
		Priority:    Priority(t.Priority),
		MaxAttempts: t.Retry.Attempts(),
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
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
	return nextRetry(job, time.Now())
}

// nextRetry is when the failed attempt of job at now is tried again: the
// task's backoff, doubling with each attempt.
func nextRetry(job *river.Job[runArgs], now time.Time) time.Time {
	return now.Add(trigger.Retry{Backoff: job.Args.Backoff}.Delay(job.Attempt))
}

// Work carries out one attempt through the dispatching handler (see
// Store.work), within the tenant window: it holds back the tenant's runs
// past it as the run starts, and lets held ones in as it ends (see
// fairness.go). A scheduled run's task and recent runs are read in the
// window's statement (see prefetch.go).
func (w *worker) Work(ctx context.Context, job *river.Job[runArgs]) error {
	hp := w.s.handler.Load()
	if hp == nil {
		return river.JobSnooze(time.Second) // not dispatching: should not happen
	}
	tenant := job.Args.TenantID
	var held bool
	var err error
	if job.Args.Event == nil && job.Args.Previous == nil {
		var p *prefetch
		var over bool
		if p, over, held, err = w.s.startRun(ctx, tenant, job.Args.TaskID); err == nil {
			ctx = context.WithValue(ctx, prefetchKey{}, p)
			if over {
				held, err = true, w.s.holdOver(ctx, tenant)
			}
		}
	} else if w.s.cfg.TenantWindow > 0 {
		held, err = w.s.holdBack(ctx, tenant)
	}
	if err != nil && ctx.Err() == nil {
		w.s.log.Warn("rivertrigger: reading a starting run's task and tenant window", "tenant", tenant, "err", err)
	}
	if w.s.cfg.TenantWindow > 0 && (held || err != nil) {
		// Some of the tenant's runs held, or maybe: let in as this
		// one ends.
		defer func() {
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if err := w.s.letIn(lctx, tenant); err != nil {
				w.s.log.Warn("rivertrigger: letting a tenant's held runs in", "tenant", tenant, "err", err)
			}
		}()
	}
	return w.s.work(ctx, *hp, job)
}

// work carries out one attempt of job's run through h and returns what
// River should do with the job. A stale run (task deleted, paused or
// moved on) is cancelled, so that the same due time can be queued again
// later; an attempt cut short because this process is stopping is
// snoozed, so that it does not count; a conflict with a run of the task
// under way here (RunNow) is tried again shortly, without using an
// attempt. River's worker and WorkDue share it.
func (s *Store) work(ctx context.Context, h trigger.DueHandler, job *river.Job[runArgs]) error {
	d := job.Args.due(job.Attempt, job.MaxAttempts, job.CreatedAt)
	jctx := context.WithValue(ctx, jobKey{}, job)
	err := h.HandleDue(jctx, d)
	if errors.Is(err, trigger.ErrStale) && d.Event == nil && d.Previous == nil {
		// Cancel the job only while the task is still not due at this
		// time, holding its row: a Resume committed meanwhile wants
		// this very run (its own insert was dropped as a duplicate of
		// this job), and a Resume committed after finds the key free.
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

// cancelStale cancels the running job of a stale run in a transaction
// holding the task's row, unless the task is due at the job's time after
// all (due). It returns stale, the error that found the run stale, when
// the job is cancelled.
func (s *Store) cancelStale(ctx context.Context, job *river.Job[runArgs], stale error) (due bool, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var status string
		var next *time.Time
		err := tx.QueryRow(ctx, s.sql(`SELECT status, next_run FROM {tasks}
			WHERE tenant_id = $1 AND id = $2 FOR UPDATE`), job.Args.TenantID, job.Args.TaskID).Scan(&status, &next)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err == nil && status == string(trigger.StatusActive) && next != nil && next.Equal(job.Args.DueAt) {
			due = true
			return nil
		}
		// River finalizes a job after Work returns, in a batch of its
		// own; finalizing it here, under the task's lock, frees its
		// unique key before a Resume can look for it. River's own update
		// later finds it no longer running and leaves it.
		_, err = tx.Exec(ctx, s.sql(`UPDATE {river_job} SET state = 'cancelled', finalized_at = now(),
			errors = array_append(errors, jsonb_build_object('at', now(), 'attempt', attempt, 'error', $2::text))
			WHERE id = $1 AND state = 'running'`), job.ID, stale.Error())
		return err
	})
	if err != nil {
		return false, fmt.Errorf("%w (cancelling its job: %w)", stale, err)
	}
	return due, stale
}

// Dispatch implements [trigger.Dispatcher.Dispatch]: it starts the River
// client (trying again, backing off up to 30 s and logging, while
// PostgreSQL cannot be reached), which works the queue's runs through h,
// and a reconciler that
// hands h.HandleLost the runs River discarded without h recording their
// end (a job rescued from a dead worker on its last attempt). When ctx
// ends it stops the client, cancelling the runs under way, and waits for
// them. One Dispatch at a time per Store.
func (s *Store) Dispatch(ctx context.Context, h trigger.DueHandler) error {
	if h == nil {
		return fmt.Errorf("%w: rivertrigger: Dispatch needs a DueHandler", trigger.ErrInvalid)
	}
	if !s.dispatchMu.TryLock() {
		return errors.New("rivertrigger: Dispatch is already running on this Store")
	}
	defer s.dispatchMu.Unlock()
	s.handler.Store(&h)
	defer s.handler.Store(nil)
	// PostgreSQL may be away as the process starts: try again, backing
	// off, rather than leave the engine without its runs.
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		err := s.client.Start(context.WithoutCancel(ctx))
		if err == nil {
			break
		}
		s.log.Error("rivertrigger: starting River; trying again", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	var wg sync.WaitGroup
	rctx, stopReconciler := context.WithCancel(ctx)
	wg.Go(func() { s.reconcile(rctx, h) })
	wg.Go(func() { s.promote(rctx) })
	<-ctx.Done()
	s.stopping.Store(true)
	defer s.stopping.Store(false)
	stopReconciler()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	if err := s.client.StopAndCancel(sctx); err != nil {
		s.log.Error("rivertrigger: stopping River", "err", err)
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
			s.log.Error("rivertrigger: reconciling discarded runs", "err", err)
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
	// newest finalized_at it saw: River writes finalized_at from the Go
	// clock of the client that discarded the job, and commits in batches,
	// so a job may appear behind one seen already. HandleLost of a run
	// already handled does nothing.
	reconcileOverlap = 10 * time.Minute
)

type lostJob struct {
	id        int64
	args      []byte
	attempt   int
	max       int
	finalized time.Time
	created   time.Time
	reason    string
}

// reconcileOnce hands h the discarded jobs finalized since since minus
// reconcileOverlap, page by page, and returns the newest finalized_at it
// saw. A job whose HandleLost fails is logged and passed over: it is
// tried again while it is within the overlap.
func (s *Store) reconcileOnce(ctx context.Context, h trigger.DueHandler, since time.Time) (time.Time, error) {
	newest := since
	afterAt, afterID := since.Add(-reconcileOverlap), int64(0)
	for {
		rows, err := s.pool.Query(ctx, s.sql(`SELECT id, args, attempt, max_attempts, finalized_at, created_at,
				coalesce(errors[array_upper(errors, 1)]->>'error', '')
			FROM {river_job}
			WHERE kind = $1 AND queue = $2 AND state = 'discarded' AND (finalized_at, id) > ($3, $4)
			ORDER BY finalized_at, id LIMIT $5`), JobKind, s.cfg.Queue, afterAt, afterID, reconcilePage)
		if err != nil {
			return newest, err
		}
		page, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lostJob, error) {
			var l lostJob
			err := row.Scan(&l.id, &l.args, &l.attempt, &l.max, &l.finalized, &l.created, &l.reason)
			return l, err
		})
		if err != nil {
			return newest, err
		}
		for _, l := range page {
			afterAt, afterID = l.finalized, l.id
			if l.finalized.After(newest) {
				newest = l.finalized
			}
			var a runArgs
			if err := json.Unmarshal(l.args, &a); err != nil {
				s.log.Error("rivertrigger: a discarded job's args", "job", l.id, "err", err)
				continue
			}
			d := a.due(l.attempt, l.max, l.created)
			reason := "discarded by River"
			if l.reason != "" {
				reason += ": " + l.reason
			}
			if err := h.HandleLost(ctx, d, reason); err != nil {
				if ctx.Err() != nil {
					return newest, err
				}
				s.log.Error("rivertrigger: recording a discarded run", "job", l.id,
					"tenant", a.TenantID, "task", a.TaskID, "err", err)
			}
		}
		if len(page) < reconcilePage {
			return newest, nil
		}
	}
}

// chainInTx queues in tx, when r succeeded and t's route chains to an
// ACTIVE task, that task's run after r: the job Enqueue queues for it
// (unique by the run it follows), so that a process dying between the
// record and the engine's delivery along the route loses no chained run,
// and the delivery's own Enqueue finds it queued. A chain past
// trigger.MaxChainDepth, or to a task that is not ACTIVE, queues nothing
// here: the engine's delivery records why on the run (Run.RouteError).
func (s *Store) chainInTx(ctx context.Context, tx pgx.Tx, r trigger.Run, t *trigger.Task) error {
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
	var data []byte
	err := tx.QueryRow(ctx, s.sql(`SELECT task FROM {tasks} WHERE tenant_id = $1 AND id = $2 AND status = 'ACTIVE'`),
		t.TenantID, t.Route.Next).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	next, err := decodeTask(data)
	if err != nil {
		return err
	}
	_, err = s.client.InsertTx(ctx, tx, runArgs{
		TenantID: next.TenantID, TaskID: next.ID, PrevRunID: prev.RunID, Previous: &prev, Backoff: next.Retry.Backoff,
	}, &river.InsertOpts{
		Queue:       s.cfg.Queue,
		Priority:    Priority(next.Priority),
		MaxAttempts: next.Retry.Attempts(),
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	})
	return err
}
