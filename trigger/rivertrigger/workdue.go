package rivertrigger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/valetkit/valet/trigger"
)

// workDueKey marks the context of a job WorkDue works: its value is the
// time WorkDue was given, which the job's completion is stamped with.
type workDueKey struct{}

// workDueWorker is what WorkDue records in a job's attempted_by.
const workDueWorker = "valet-workdue"

// WorkDue works, in the calling goroutine and without River's client
// running, the runs of this store's queue that are due at now: the valet
// jobs of Config.Queue available, scheduled or retryable with a
// scheduled time at or before now. It hands each to h (a
// *trigger.Engine is a DueHandler; it need not be running) as River's
// worker does, and finishes its job as River would: completed when the
// run ends (the run's record, the task's next time and the next run's job
// are written in the same transaction, as in production), cancelled when
// the run is stale, scheduled again at now plus the delay when it is put
// off (a run of the task under way), retryable at now plus the task's
// backoff after a failed attempt, and discarded after the last one (then
// h.HandleLost is told, as the reconciler of Dispatch would). It returns
// how many jobs it worked.
//
// WorkDue is for tests: with a clocktest.Clock given to the store
// (Config.Clock) and the engine (trigger.Config.Clock), a test moves the
// clock and calls WorkDue(ctx, engine, clk.Now()) to run what is due at
// that time, deterministically, instead of waiting for River to fetch
// jobs by the database's time. The runs a worked run queues (the next
// occurrence, a chained run) are worked by a later call once due. Runs
// queued at once (an event's, a chained one) are scheduled by the
// database's time, so a clock behind the real time does not see them
// due. Do not call it while Dispatch works the same queue: the jobs are
// claimed with SKIP LOCKED, so each is worked once, but by whichever
// comes first. Each job's run is bounded by Config.JobTimeout. When ctx
// ends, the jobs claimed and not yet finished are made available again
// without using an attempt, and WorkDue returns ctx's error.
func (s *Store) WorkDue(ctx context.Context, h trigger.DueHandler, now time.Time) (int, error) {
	if h == nil {
		return 0, fmt.Errorf("%w: rivertrigger: WorkDue needs a DueHandler", trigger.ErrInvalid)
	}
	now = pgTime(now)
	jobs, err := s.claimDue(ctx, now)
	if err != nil {
		return 0, s.fail(ctx, "work due", err)
	}
	for i, job := range jobs {
		if err := ctx.Err(); err != nil {
			return i, s.fail(ctx, "work due", errors.Join(err, s.giveBack(ctx, jobs[i:])))
		}
		jctx, cancel := context.WithTimeout(context.WithValue(ctx, workDueKey{}, now), s.cfg.JobTimeout)
		werr := s.work(jctx, h, job)
		cancel()
		if err := ctx.Err(); err != nil {
			return i, s.fail(ctx, "work due", errors.Join(err, s.giveBack(ctx, jobs[i:])))
		}
		if err := s.finishJob(ctx, h, job, werr, now); err != nil {
			return i + 1, s.fail(ctx, "work due", errors.Join(err, s.giveBack(ctx, jobs[i+1:])))
		}
	}
	return len(jobs), nil
}

// claimDue sets the queue's valet jobs due at now running, as River's
// fetch does (one more attempt, attempted at now), and returns them in
// River's order: priority, scheduled time, id.
func (s *Store) claimDue(ctx context.Context, now time.Time) ([]*river.Job[runArgs], error) {
	var jobs []*river.Job[runArgs]
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.sql(`WITH due AS (
				SELECT id FROM {river_job}
				WHERE kind = $1 AND queue = $2 AND state IN ('available', 'scheduled', 'retryable')
					AND scheduled_at <= $3
				ORDER BY priority, scheduled_at, id
				FOR UPDATE SKIP LOCKED)
			UPDATE {river_job} j SET state = 'running', attempt = j.attempt + 1, attempted_at = $3,
				attempted_by = array_append(j.attempted_by, $4::text)
			FROM due WHERE j.id = due.id
			RETURNING j.id`), JobKind, s.cfg.Queue, now, workDueWorker)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, id := range ids {
			row, err := s.client.JobGetTx(ctx, tx, id)
			if err != nil {
				return err
			}
			job := &river.Job[runArgs]{JobRow: row}
			if err := json.Unmarshal(row.EncodedArgs, &job.Args); err != nil {
				return fmt.Errorf("job %d's args: %w", id, err)
			}
			jobs = append(jobs, job)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(jobs, func(a, b *river.Job[runArgs]) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), a.ScheduledAt.Compare(b.ScheduledAt), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// finishJob sets job's state from werr, what working it returned, as
// River's executor would, at now.
func (s *Store) finishJob(ctx context.Context, h trigger.DueHandler, job *river.Job[runArgs], werr error, now time.Time) error {
	ctx = context.WithoutCancel(ctx)
	var snooze *river.JobSnoozeError
	switch {
	case werr == nil:
		_, err := s.pool.Exec(ctx, s.sql(`UPDATE {river_job} SET state = 'completed', finalized_at = $2
			WHERE id = $1 AND state = 'running'`), job.ID, now)
		return err
	case errors.As(werr, &snooze):
		_, err := s.pool.Exec(ctx, s.sql(`UPDATE {river_job} SET state = 'scheduled', scheduled_at = $2,
				attempt = greatest(attempt - 1, 0)
			WHERE id = $1 AND state = 'running'`), job.ID, now.Add(snooze.Duration))
		return err
	}
	var cancelled *river.JobCancelError
	state, at := "retryable", nextRetry(job, now)
	switch {
	case errors.As(werr, &cancelled):
		state = "cancelled"
	case job.Attempt >= job.MaxAttempts:
		state = "discarded"
	}
	// $4 is when the job is next tried (retryable) or finalized.
	set := `state = 'retryable', scheduled_at = $4`
	if state != "retryable" {
		set, at = `state = '`+state+`', finalized_at = $4`, now // state is one of three literals
	}
	tag, err := s.pool.Exec(ctx, s.sql(`UPDATE {river_job} SET `+set+`,
			errors = array_append(errors, jsonb_build_object('at', $2::timestamptz, 'attempt', attempt, 'error', $3::text))
		WHERE id = $1 AND state = 'running'`), job.ID, now, werr.Error(), at)
	if err != nil || state != "discarded" || tag.RowsAffected() == 0 {
		return err
	}
	d := job.Args.due(job.Attempt, job.MaxAttempts, job.CreatedAt)
	// Under WorkDue's mark, so that the DEAD task's notice is sent by the
	// engine, not queued for a Dispatch that is not running.
	return h.HandleLost(context.WithValue(ctx, workDueKey{}, now), d, "discarded by River: "+werr.Error())
}

// giveBack makes the claimed jobs still running available again at their
// time, their attempt not counted, as River does with the jobs of a
// client that stops.
func (s *Store) giveBack(ctx context.Context, jobs []*river.Job[runArgs]) error {
	if len(jobs) == 0 {
		return nil
	}
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_, err := s.pool.Exec(cctx, s.sql(`UPDATE {river_job} SET state = 'available', attempt = greatest(attempt - 1, 0)
		WHERE id = ANY($1) AND state = 'running'`), ids)
	return err
}

// completeJob completes the running job of the run Finish records, in tx:
// through River in River's worker, stamped with WorkDue's time in
// WorkDue.
func (s *Store) completeJob(ctx context.Context, tx pgx.Tx, job *river.Job[runArgs]) error {
	if now, ok := ctx.Value(workDueKey{}).(time.Time); ok {
		_, err := tx.Exec(ctx, s.sql(`UPDATE {river_job} SET state = 'completed', finalized_at = $2
			WHERE id = $1 AND state = 'running'`), job.ID, now)
		return err
	}
	_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
	return err
}
