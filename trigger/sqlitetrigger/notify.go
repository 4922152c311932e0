package sqlitetrigger

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/valetkit/valet/trigger"
)

// NotifyJobKind is the River kind of the job that delivers a notice
// about a run (trigger.RunNotice: its end, the approvals it waits for,
// their expiry), queued with the run's record.
const NotifyJobKind = "valet_trigger_notify"

// maxNotifyBackoff bounds the wait between two attempts of a notice.
const maxNotifyBackoff = time.Hour

// notifyArgs are a notice's job arguments, unique by its idempotency key,
// so that a run recorded twice with the same end queues its notice once.
type notifyArgs struct {
	Key          string               `json:"key" river:"unique"`
	Notification trigger.Notification `json:"notification"`
}

func (notifyArgs) Kind() string { return NotifyJobKind }

// DispatchesNotifications implements [trigger.NotifyDispatcher]: Finish
// and SwapRun queue the notice of the run they record, in their
// transaction.
func (s *Store) DispatchesNotifications(context.Context) bool { return true }

// settledInTx queues in tx, when r ends the waiting run old (its
// approvals settled or expired), r's notice and the run its task's route
// chains to, as Finish does for the end of an attempt.
func (s *Store) settledInTx(ctx context.Context, tx *sql.Tx, old, r trigger.Run) error {
	if old.Status != trigger.RunWaiting || r.Status == trigger.RunWaiting {
		return nil
	}
	t, err := getTask(ctx, tx, r.TenantID, r.TaskID, false)
	if err != nil {
		return err
	}
	if err := s.chainInTx(ctx, tx, r, t); err != nil {
		return fmt.Errorf("queueing the chained run: %w", err)
	}
	return s.notifyInTx(ctx, tx, r, t)
}

// notifyInTx queues in tx the notice of r as recorded, if it has one.
func (s *Store) notifyInTx(ctx context.Context, tx *sql.Tx, r trigger.Run, t *trigger.Task) error {
	n, ok := trigger.RunNotice(t, r)
	if !ok {
		return nil
	}
	_, err := s.client.InsertTx(ctx, tx, notifyArgs{Key: n.IdempotencyKey, Notification: n}, &river.InsertOpts{
		Queue:       s.notifyQueue,
		MaxAttempts: s.cfg.NotifyAttempts,
		UniqueOpts:  river.UniqueOpts{ByArgs: true},
	})
	if err != nil {
		return fmt.Errorf("queueing the run's notice: %w", err)
	}
	return nil
}

type notifyWorker struct {
	river.WorkerDefaults[notifyArgs]
	s *Store
}

// NextRetry is Config.NotifyBackoff, doubling with each attempt, at most
// an hour.
func (w *notifyWorker) NextRetry(job *river.Job[notifyArgs]) time.Time {
	d := w.s.cfg.NotifyBackoff
	for i := 1; i < job.Attempt && d < maxNotifyBackoff; i++ {
		d *= 2
	}
	return time.Now().Add(min(d, maxNotifyBackoff))
}

// Work makes one attempt at the notice through the dispatching handler
// when it is a trigger.NotificationHandler (a *trigger.Engine is).
func (w *notifyWorker) Work(ctx context.Context, job *river.Job[notifyArgs]) error {
	hp := w.s.handler.Load()
	if hp == nil {
		return river.JobSnooze(time.Second) // not dispatching: should not happen
	}
	h, ok := (*hp).(trigger.NotificationHandler)
	if !ok {
		return river.JobCancel(fmt.Errorf("sqlitetrigger: the dispatching handler %T does not deliver notices", *hp))
	}
	err := h.HandleNotification(ctx, job.Args.Notification, job.Attempt >= job.MaxAttempts)
	if err != nil && ctx.Err() != nil && w.s.stopping.Load() {
		return river.JobSnooze(0)
	}
	return err
}
