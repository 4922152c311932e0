package trigger

import (
	"context"
	"time"
)

// Store keeps tasks and their run histories. Implementations are safe for
// concurrent use, copy what they are given and what they return (a
// caller never shares a map with the store), and wrap the sentinel
// errors ErrInvalid, ErrNotFound and ErrConflict so callers use
// errors.Is.
//
// Every method that reads or writes one task takes its tenant id; a task
// of another tenant is ErrNotFound. A tenant or task id no task can have
// (empty, longer than MaxIDLen bytes, not UTF-8, holding a NUL byte) is
// ErrInvalid wherever a method takes one, never an error of the store's
// database. trigger/triggertest.RunStore is the
// conformance suite every Store passes.
type Store interface {
	// Create adds t, which must pass Check (ErrInvalid), and fails with
	// ErrConflict when the tenant has a task with that ID. It sets
	// t.Revision to 1, t.UpdatedAt to now and t.CreatedAt to now when it
	// is zero.
	Create(ctx context.Context, t *Task) error
	// Get returns the tenant's task or ErrNotFound.
	Get(ctx context.Context, tenantID, id string) (*Task, error)
	// List returns the tenant's tasks with one of statuses (all of them
	// when none is given), by CreatedAt then ID. An invalid status is
	// ErrInvalid.
	List(ctx context.Context, tenantID string, statuses ...Status) ([]*Task, error)
	// Update replaces the stored task with t if the stored Revision is
	// t.Revision (ErrConflict otherwise, ErrNotFound when it is gone);
	// t must pass Check. It keeps the stored CreatedAt, increments
	// t.Revision and sets t.UpdatedAt to now.
	Update(ctx context.Context, t *Task) error
	// Delete removes the tenant's task and its run history, or returns
	// ErrNotFound.
	Delete(ctx context.Context, tenantID, id string) error

	// AddRun appends r, which must pass Check, to the history of its
	// task (r.TenantID, r.TaskID): ErrNotFound when there is no such
	// task, ErrConflict when the history holds a run with r.ID. A store
	// keeps a bounded number of runs per task, dropping the oldest added.
	AddRun(ctx context.Context, r Run) error
	// UpdateRun replaces the run with r.ID in its task's history, or
	// returns ErrNotFound (also when the run was dropped).
	UpdateRun(ctx context.Context, r Run) error
	// Runs returns the task's most recent runs, newest added first, at
	// most limit of them (all kept when limit is 0; ErrInvalid when it
	// is negative), or ErrNotFound when the tenant has no such task.
	Runs(ctx context.Context, tenantID, taskID string, limit int) ([]Run, error)

	// Due returns ACTIVE tasks of every tenant whose NextRun is set and
	// not after now, earliest NextRun first, then higher Priority, then
	// by TenantID and ID; at most limit of them, which must be positive
	// (ErrInvalid).
	Due(ctx context.Context, now time.Time, limit int) ([]*Task, error)
}

// RunSwapper is a Store whose run records can be replaced by compare and
// set, so that replicas settling one run's approval at once write it
// once: [Engine.ApprovalSettled] uses it when the Store has it (rivertrigger
// does), and otherwise relies on its own lock, which holds in one process.
type RunSwapper interface {
	// SwapRun replaces the run old.ID of its task with r when the stored
	// run is still old (every field as Runs returned it), or returns
	// ErrConflict when another writer changed it first, ErrNotFound when
	// it is gone. r must pass Check and have old's ID, TenantID and
	// TaskID (ErrInvalid).
	SwapRun(ctx context.Context, old, r Run) error
}

// RunSettler is a RunSwapper that records the end of a waiting run and
// its task's move out of PENDING_APPROVAL (to COMPLETED, or ACTIVE when
// the run expired) in one step, so that a process that dies in between
// leaves neither without the other: [Engine.ApprovalSettled] uses it when
// the Store has it (rivertrigger and MemoryStore do), and otherwise
// records the run, then the task.
type RunSettler interface {
	RunSwapper
	// SettleRun is SwapRun(ctx, old, r) and Update(ctx, t) as one
	// transaction: both are written or neither. It returns ErrConflict,
	// writing nothing, when the stored run is not old or the stored
	// task's Revision is not t.Revision, and ErrNotFound when either is
	// gone; t must be r's task and pass Check (ErrInvalid). On success t
	// is as Update leaves it (Revision and UpdatedAt set).
	SettleRun(ctx context.Context, old, r Run, t *Task) error
}

// ExpiryDispatcher is a Dispatcher that times the expiry of waiting runs'
// approvals itself, durably: when a run is recorded waiting with an
// approval that expires, it queues, with the record, a call of the
// engine's [Engine.HandleExpiry] at that time, which whichever replica
// is dispatching then makes, after restarts too. The engine then keeps no
// sweeper of its own for them. trigger/rivertrigger is one.
type ExpiryDispatcher interface {
	Dispatcher
	// DispatchesExpiry reports that the store queues the expiries.
	DispatchesExpiry() bool
}

// ExpiryHandler handles the expiries an ExpiryDispatcher delivers. The
// Engine is one.
type ExpiryHandler interface {
	// HandleExpiry settles, as expired, the approvals of the tenant's
	// waiting run runID of task taskID that expire by at (the time the
	// dispatcher was asked to call at) or by the handler's clock if that
	// is later; it does nothing for a run that is no longer waiting, so it
	// may be called more than once.
	HandleExpiry(ctx context.Context, tenantID, taskID, runID string, at time.Time) error
}

// NotifyDispatcher is a Dispatcher that queues the notice of a run
// (RunNotice: a result, a failure, a refusal, the approvals a waiting run
// asks for, their expiry) in the transaction that records the run so,
// and delivers it itself, at least once and with retries, through the
// engine's [Engine.HandleNotification] on whichever replica works it: a
// process that dies between the record and the delivery loses no notice.
// The records that queue it are Finish (the end of an attempt, a run of
// RunNow) and, when the store is a RunSwapper too, the SwapRun that ends
// a waiting run (its approvals settled or expired). The engine then does
// not send these notices itself. trigger/rivertrigger is one.
type NotifyDispatcher interface {
	Dispatcher
	// DispatchesNotifications reports that Finish and SwapRun, called
	// with ctx, queue the notices (the engine passes the context it
	// records the run with).
	DispatchesNotifications(ctx context.Context) bool
}

// NotificationHandler delivers the notices a NotifyDispatcher queued. The
// Engine is one.
type NotificationHandler interface {
	// HandleNotification makes one attempt to deliver n on its channel's
	// Notifier and returns its error, for the dispatcher to try again;
	// on the last attempt (last) a failure is recorded on the run
	// (Run.RouteError) and logged.
	HandleNotification(ctx context.Context, n Notification, last bool) error
}

// SettlementKeeper is a Store that keeps the settlements of approvals
// whose run is not yet recorded waiting (the user answered while the run
// was finishing), so that the replica recording the run applies them
// whichever replica heard them. [Engine.ApprovalSettled] uses it when the
// Store has it (rivertrigger does), and otherwise keeps them in its own
// memory; either way only while a run of the task is in flight
// (RunRunning) or holds the approval.
type SettlementKeeper interface {
	// KeepSettled keeps s, once per (tenant, task, approval): the task
	// must exist (ErrNotFound). A store keeps a bounded number per task.
	KeepSettled(ctx context.Context, s Settled) error
	// TakeSettled removes and returns the settlements kept for the
	// tenant's task among approvalIDs: each is returned to one caller
	// only, however many take at once.
	TakeSettled(ctx context.Context, tenantID, taskID string, approvalIDs []string) ([]Settled, error)
}
