package rivertrigger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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
// queues the notice of the run it records, in its transaction, except
// under WorkDue (ctx), where the engine sends it itself as it ends.
func (s *Store) DispatchesNotifications(ctx context.Context) bool {
	_, workDue := ctx.Value(workDueKey{}).(time.Time)
	return !workDue
}

// settledInTx queues in tx, when r ends the waiting run old (its
// approvals settled or expired: SwapRun), r's notice and the run its
// task's route chains to, as Finish does for the end of an attempt.
func (s *Store) settledInTx(ctx context.Context, tx pgx.Tx, old, r trigger.Run) error {
	if old.Status != trigger.RunWaiting || r.Status == trigger.RunWaiting {
		return nil
	}
	var data []byte
	err := tx.QueryRow(ctx, s.sql(`SELECT task FROM {tasks} WHERE tenant_id = $1 AND id = $2`),
		r.TenantID, r.TaskID).Scan(&data)
	if err != nil {
		return err // the run was written: its task is there (a foreign key)
	}
	t, err := decodeTask(data)
	if err != nil {
		return err
	}
	if err := s.chainInTx(ctx, tx, r, t); err != nil {
		return fmt.Errorf("queueing the chained run: %w", err)
	}
	return s.notifyInTx(ctx, tx, r, t)
}

// notifyInTx queues in tx the notice of r as recorded, if it has one.
func (s *Store) notifyInTx(ctx context.Context, tx pgx.Tx, r trigger.Run, t *trigger.Task) error {
	n, ok := trigger.RunNotice(t, r)
	if !ok || !s.DispatchesNotifications(ctx) {
		return nil
	}
	_, err := s.client.InsertTx(ctx, tx, notifyArgs{Key: n.IdempotencyKey, Notification: n}, &river.InsertOpts{
		Queue:       s.cfg.NotifyQueue,
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
// when it is a trigger.NotificationHandler (a *trigger.Engine is). An
// attempt cut short because this process is stopping does not count.
func (w *notifyWorker) Work(ctx context.Context, job *river.Job[notifyArgs]) error {
	hp := w.s.handler.Load()
	if hp == nil {
		return river.JobSnooze(time.Second) // not dispatching: should not happen
	}
	h, ok := (*hp).(trigger.NotificationHandler)
	if !ok {
		return river.JobCancel(fmt.Errorf("rivertrigger: the dispatching handler %T does not deliver notices", *hp))
	}
	err := h.HandleNotification(ctx, job.Args.Notification, job.Attempt >= job.MaxAttempts)
	if err != nil && ctx.Err() != nil && w.s.stopping.Load() {
		return river.JobSnooze(0)
	}
	return err
}
