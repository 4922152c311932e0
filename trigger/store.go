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
