package sqlitetrigger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/valetkit/valet/trigger"
)

// ExpiryJobKind is the River kind of the job that expires a waiting run's
// approvals at their time.
const ExpiryJobKind = "valet_trigger_expiry"

// expiryArgs are an expiry's job arguments, unique by run and time.
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
func (s *Store) queueExpiry(ctx context.Context, tx *sql.Tx, r trigger.Run) error {
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
	at = sqlTime(at)
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
		return river.JobCancel(fmt.Errorf("sqlitetrigger: the dispatching handler %T does not handle expiries", *hp))
	}
	a := job.Args
	err := h.HandleExpiry(ctx, a.TenantID, a.TaskID, a.RunID, a.At)
	if err != nil && ctx.Err() != nil && w.s.stopping.Load() {
		return river.JobSnooze(0)
	}
	return err
}
