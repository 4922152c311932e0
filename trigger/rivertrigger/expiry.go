package rivertrigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/valetkit/valet/trigger"
)

// ExpiryJobKind is the River kind of the job that expires a waiting run's
// approvals at their time.
const ExpiryJobKind = "valet_trigger_expiry"

// expiryArgs are an expiry's job arguments, unique by run and time, so
// that a run recorded waiting more than once (each approval settled)
// queues each expiry once.
type expiryArgs struct {
	TenantID string    `json:"tenant_id" river:"unique"`
	TaskID   string    `json:"task_id" river:"unique"`
	RunID    string    `json:"run_id" river:"unique"`
	At       time.Time `json:"at" river:"unique"`
}

func (expiryArgs) Kind() string { return ExpiryJobKind }

// DispatchesExpiry implements [trigger.ExpiryDispatcher]: a run recorded
// waiting has the expiry of its approvals queued as a River job, in the
// transaction that records it.
func (s *Store) DispatchesExpiry() bool { return true }

// queueExpiry queues in tx, when r waits, the expiry of its first
// unsettled approval that expires.
func (s *Store) queueExpiry(ctx context.Context, tx pgx.Tx, r trigger.Run) error {
	if r.Status != trigger.RunWaiting {
		return nil
	}
	var at time.Time
	for _, a := range r.Approvals {
		if a.Outcome == "" && !a.ExpiresAt.IsZero() && (at.IsZero() || a.ExpiresAt.Before(at)) {
			at = a.ExpiresAt
		}
	}
	if at.IsZero() {
		return nil
	}
	at = pgTime(at)
	_, err := s.client.InsertTx(ctx, tx, expiryArgs{TenantID: r.TenantID, TaskID: r.TaskID, RunID: r.ID, At: at},
		&river.InsertOpts{Queue: s.cfg.Queue, Priority: 1, ScheduledAt: at, UniqueOpts: river.UniqueOpts{ByArgs: true}})
	if err != nil {
		return fmt.Errorf("queueing the approvals' expiry: %w", err)
	}
	return nil
}

type expiryWorker struct {
	river.WorkerDefaults[expiryArgs]
	s *Store
}

// Work hands the expiry to the dispatching handler when it is a
// trigger.ExpiryHandler (a *trigger.Engine is).
func (w *expiryWorker) Work(ctx context.Context, job *river.Job[expiryArgs]) error {
	hp := w.s.handler.Load()
	if hp == nil {
		return river.JobSnooze(time.Second) // not dispatching: should not happen
	}
	h, ok := (*hp).(trigger.ExpiryHandler)
	if !ok {
		return river.JobCancel(fmt.Errorf("rivertrigger: the dispatching handler %T does not handle expiries", *hp))
	}
	a := job.Args
	err := h.HandleExpiry(ctx, a.TenantID, a.TaskID, a.RunID, a.At)
	if err != nil && ctx.Err() != nil && w.s.stopping.Load() {
		return river.JobSnooze(0)
	}
	return err
}

// maxKeptSettled is how many settlements KeepSettled keeps per task, the
// newest.
const maxKeptSettled = 1024

// KeepSettled implements [trigger.SettlementKeeper]: s is kept in
// valet_trigger_settled until the replica recording its run takes it,
// once per approval, at most maxKeptSettled per task (the oldest go).
func (s *Store) KeepSettled(ctx context.Context, st trigger.Settled) error {
	if err := checkIDs("tenant ID", st.TenantID, "task ID", st.TaskID, "approval ID", st.ApprovalID); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("rivertrigger: keep settled: %w", err)
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, s.sql(`INSERT INTO {settled} (tenant_id, task_id, approval_id, settled)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`), st.TenantID, st.TaskID, st.ApprovalID, string(data))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
			return fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, st.TenantID, st.TaskID)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, s.sql(`DELETE FROM {settled} WHERE tenant_id = $1 AND task_id = $2 AND seq <= (
			SELECT seq FROM {settled} WHERE tenant_id = $1 AND task_id = $2
			ORDER BY seq DESC OFFSET $3 LIMIT 1)`), st.TenantID, st.TaskID, maxKeptSettled)
		return err
	})
	return s.fail(ctx, "keep settled", err)
}

// TakeSettled implements [trigger.SettlementKeeper], deleting what it
// returns in the same statement, so each is taken once.
func (s *Store) TakeSettled(ctx context.Context, tenantID, taskID string, approvalIDs []string) ([]trigger.Settled, error) {
	if err := checkIDs("tenant ID", tenantID, "task ID", taskID); err != nil {
		return nil, err
	}
	if len(approvalIDs) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, s.sql(`DELETE FROM {settled}
		WHERE tenant_id = $1 AND task_id = $2 AND approval_id = ANY($3) RETURNING settled`), tenantID, taskID, approvalIDs)
	if err != nil {
		return nil, s.fail(ctx, "take settled", err)
	}
	datas, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.fail(ctx, "take settled", err)
	}
	out := make([]trigger.Settled, 0, len(datas))
	for _, d := range datas {
		var st trigger.Settled
		if err := json.Unmarshal(d, &st); err != nil {
			return nil, fmt.Errorf("rivertrigger: a kept settlement: %w", err)
		}
		out = append(out, st)
	}
	return out, nil
}
