package trigger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// CreateTask validates t and stores it for its tenant (t.TenantID). An
// executor that is not registered is ErrInvalid, and so is a condition
// that is not. An empty Status is ACTIVE; COMPLETED, EXPIRED and DEAD are
// refused. CreateTask sets t.NextRun: for a schedule, its first time from
// now (ErrInvalid when there is none: a one-time task in the past is
// refused); for a condition, now (its first poll; a condition that holds
// already then fires once); for events, none. It clears t.LastRun and
// t.ConditionMet and sets what Store.Create sets. When the task's executor
// is a TaskChecker, it is asked about the task before it is stored; its
// refusal is ErrInvalid.
func (e *Engine) CreateTask(ctx context.Context, t *Task) error {
	if t == nil {
		return fmt.Errorf("%w: nil task", ErrInvalid)
	}
	if _, ok := e.executors[t.ExecutorName()]; !ok {
		return fmt.Errorf("%w: task %q: no executor %q", ErrInvalid, t.ID, t.ExecutorName())
	}
	if t.Trigger.Kind == KindCondition && e.conditions[t.Trigger.Condition] == nil {
		return fmt.Errorf("%w: task %q: no condition %q", ErrInvalid, t.ID, t.Trigger.Condition)
	}
	if err := e.checkRoute(t); err != nil {
		return err
	}
	switch t.Status {
	case "":
		t.Status = StatusActive
	case StatusCompleted, StatusExpired, StatusDead:
		return fmt.Errorf("%w: task %q: created %s", ErrInvalid, t.ID, t.Status)
	}
	if err := t.Check(); err != nil {
		return err
	}
	if err := e.checkTask(ctx, t); err != nil {
		return err
	}
	now := e.clock.Now()
	switch t.Trigger.Kind {
	case KindSchedule:
		next, ok := t.Trigger.Schedule.Next(now.Add(-time.Nanosecond))
		if !ok {
			return fmt.Errorf("%w: task %q: %v has no time from now on", ErrInvalid, t.ID, t.Trigger.Schedule)
		}
		t.NextRun = next
	case KindCondition:
		t.NextRun = now
	default:
		t.NextRun = time.Time{}
	}
	t.LastRun, t.ConditionMet = time.Time{}, false
	if err := e.store.Create(ctx, t); err != nil {
		return err
	}
	e.notify()
	e.scheduled(t)
	return nil
}

// Get returns the tenant's task, or ErrNotFound.
func (e *Engine) Get(ctx context.Context, tenantID, id string) (*Task, error) {
	if err := checkTask(tenantID, id); err != nil {
		return nil, err
	}
	return e.store.Get(ctx, tenantID, id)
}

// List returns the tenant's tasks with one of statuses, all when none is
// given.
func (e *Engine) List(ctx context.Context, tenantID string, statuses ...Status) ([]*Task, error) {
	if err := checkID("tenant ID", tenantID); err != nil {
		return nil, err
	}
	return e.store.List(ctx, tenantID, statuses...)
}

// Delete removes the tenant's task and its history. A run under way
// finishes, but its outcome is not recorded.
func (e *Engine) Delete(ctx context.Context, tenantID, id string) error {
	if err := checkTask(tenantID, id); err != nil {
		return err
	}
	return e.store.Delete(ctx, tenantID, id)
}

// Runs returns the task's newest runs, newest first, at most limit (all
// kept when 0).
func (e *Engine) Runs(ctx context.Context, tenantID, id string, limit int) ([]Run, error) {
	if err := checkTask(tenantID, id); err != nil {
		return nil, err
	}
	return e.store.Runs(ctx, tenantID, id, limit)
}

// Pause stops an ACTIVE task from running; pausing a PAUSED task does
// nothing. Other statuses are ErrInvalid. A run under way finishes.
func (e *Engine) Pause(ctx context.Context, tenantID, id string) (*Task, error) {
	return e.mutate(ctx, tenantID, id, func(t *Task) error {
		switch t.Status {
		case StatusActive, StatusPaused:
			t.Status = StatusPaused
			return nil
		}
		return fmt.Errorf("%w: task %q is %s, not ACTIVE", ErrInvalid, id, t.Status)
	})
}

// Resume makes a PAUSED task ACTIVE again; resuming an ACTIVE task does
// nothing. Other statuses are ErrInvalid. NextRun is recomputed from the
// first time not yet handled, by the task's MissedPolicy: CatchUpOnce
// runs once, at once, when times passed while it was paused; Skip runs
// none of them. A one-time task whose time was skipped becomes EXPIRED.
// A run waiting for its next attempt when the task was paused gets it at
// the task's next firing, with the same run id.
func (e *Engine) Resume(ctx context.Context, tenantID, id string) (*Task, error) {
	t, err := e.mutate(ctx, tenantID, id, func(t *Task) error {
		switch t.Status {
		case StatusActive:
			return nil
		case StatusPaused:
		default:
			return fmt.Errorf("%w: task %q is %s, not PAUSED", ErrInvalid, id, t.Status)
		}
		last := t.LastRun
		if !t.NextRun.IsZero() {
			last = t.NextRun.Add(-time.Nanosecond)
		} else if last.IsZero() {
			last = t.CreatedAt
		}
		t.Status = StatusActive
		t.NextRun = e.nextRun(t, last, e.clock.Now())
		if t.NextRun.IsZero() && t.Trigger.Kind == KindSchedule {
			t.Status = StatusExpired
			if !t.Trigger.Schedule.At.IsZero() && !t.LastRun.Before(t.Trigger.Schedule.At) {
				t.Status = StatusCompleted // it ran while it was being paused
			}
		}
		return nil
	})
	if err == nil {
		e.notify()
		e.scheduled(t)
	}
	return t, err
}

// Retry makes a DEAD task ACTIVE again, with NextRun recomputed from its
// last run by its MissedPolicy; a task with no schedule time left (a
// one-time task) runs at once. Other statuses are ErrInvalid.
func (e *Engine) Retry(ctx context.Context, tenantID, id string) (*Task, error) {
	t, err := e.mutate(ctx, tenantID, id, func(t *Task) error {
		if t.Status != StatusDead {
			return fmt.Errorf("%w: task %q is %s, not DEAD", ErrInvalid, id, t.Status)
		}
		now := e.clock.Now()
		last := t.LastRun
		if r, ok := e.lastScheduled(ctx, t); ok && r.StartedAt.After(last) {
			last = r.StartedAt
		}
		if last.IsZero() {
			last = t.CreatedAt
		}
		t.Status = StatusActive
		t.NextRun = e.nextRun(t, last, now)
		if t.NextRun.IsZero() && t.Trigger.Kind == KindSchedule {
			t.NextRun = now
		}
		return nil
	})
	if err == nil {
		e.notify()
		e.scheduled(t)
	}
	return t, err
}

// RunNow runs the tenant's task once, now, outside its schedule and
// whatever its status, in the caller's goroutine: one attempt, no retry,
// within the MaxConcurrent bound. It records the run in the history (a
// failure as RunDead, as no attempt follows; a refusal, ErrRefused, as
// RunRefused, told to the task's channel), sets LastRun, and leaves
// NextRun and Status alone. It returns the finished run; an execution
// failure is in the run, not the error. A task with a run under way is
// ErrConflict. On a Dispatcher a run that ended is recorded with LastRun
// in one Finish, so that a NotifyDispatcher queues its notice, and the
// run its route chains to, with the record.
func (e *Engine) RunNow(ctx context.Context, tenantID, id string) (Run, error) {
	if err := checkTask(tenantID, id); err != nil {
		return Run{}, err
	}
	t, err := e.store.Get(ctx, tenantID, id)
	if err != nil {
		return Run{}, err
	}
	if _, ok := e.executors[t.ExecutorName()]; !ok {
		return Run{}, fmt.Errorf("%w: task %q: no executor %q", ErrInvalid, id, t.ExecutorName())
	}
	k := taskKey{tenantID, id}
	if !e.claim(k) {
		return Run{}, fmt.Errorf("%w: task %q has a run under way", ErrConflict, id)
	}
	defer e.notify()
	defer e.release(k)
	if err := e.acquire(ctx); err != nil {
		return Run{}, err
	}
	defer e.releaseSlot()

	now := e.clock.Now()
	r := Run{
		ID: fitID(RunID(id, now) + "#now"), TaskID: id, TenantID: tenantID,
		DueAt: now, StartedAt: now, Status: RunRunning, Attempt: 1,
	}
	if err := e.store.AddRun(ctx, r); err != nil {
		return Run{}, err
	}
	r, res, xerr := e.attempt(ctx, t, r, nil, nil)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if refused(xerr) {
		r, xerr = refuse(r, res), nil // told along the route as any outcome
	} else if xerr != nil {
		r.Status = RunDead
	}
	queued, err := e.recordNow(wctx, r, xerr == nil)
	if err != nil {
		return r, err
	}
	if xerr == nil {
		e.endedAs(ctx, t, r, res, nil, queued) // the result goes along the task's route; a waiting run is watched
	} else {
		e.budgetSteps(t, r, res)
		e.observe(LifecycleFailed, t, r) // the task is not DEAD: nothing to notify
	}
	return r, nil
}

// recordNow records run r of RunNow and the task's LastRun. On a
// Dispatcher, a run that ended (told) is recorded with its task in one
// Finish, so that a NotifyDispatcher queues its notice and a chained run
// with the record; queued reports that it did. A failed run (the task is
// not DEAD: nothing to tell) is recorded apart from its task.
func (e *Engine) recordNow(ctx context.Context, r Run, told bool) (queued bool, err error) {
	disp, ok := e.store.(Dispatcher)
	if !ok || !told {
		if err := e.store.UpdateRun(ctx, r); err != nil {
			return false, err
		}
		_, err := e.mutate(ctx, r.TenantID, r.TaskID, func(t *Task) error {
			t.LastRun = r.StartedAt
			return nil
		})
		return false, err
	}
	return e.finishAsIs(ctx, disp, r, func(t *Task) { t.LastRun = r.StartedAt })
}

// recordAlone records r, the end of an attempt whose task was
// rescheduled meanwhile, leaving the task as it is: in one Finish with
// the task as stored, so that a NotifyDispatcher queues its notice with
// it (queued), unless r is dead (its task is not DEAD: the run is told by
// the engine, as before).
func (e *Engine) recordAlone(ctx context.Context, disp Dispatcher, r Run) (queued bool, err error) {
	if r.Status == RunDead || r.Status == RunFailed {
		return false, e.store.UpdateRun(ctx, r)
	}
	return e.finishAsIs(ctx, disp, r, func(*Task) {})
}

// finishAsIs records r in one Finish with its task as stored, changed by
// f, reading the task again on ErrConflict, and reports whether a
// NotifyDispatcher queued r's notice with it.
func (e *Engine) finishAsIs(ctx context.Context, disp Dispatcher, r Run, f func(*Task)) (queued bool, err error) {
	for i := 0; ; i++ {
		t, err := e.store.Get(ctx, r.TenantID, r.TaskID)
		if err != nil {
			return false, err
		}
		f(t)
		err = disp.Finish(ctx, r, t)
		if err == nil {
			return e.notifiesQueued(ctx), nil
		}
		if !errors.Is(err, ErrConflict) || i >= conflictRetries {
			return false, err
		}
	}
}

// mutate reads the task, applies f and writes it back, reading again on
// ErrConflict a few times.
func (e *Engine) mutate(ctx context.Context, tenantID, id string, f func(*Task) error) (*Task, error) {
	if err := checkTask(tenantID, id); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		t, err := e.store.Get(ctx, tenantID, id)
		if err != nil {
			return nil, err
		}
		if err := f(t); err != nil {
			return nil, err
		}
		err = e.store.Update(ctx, t)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, ErrConflict) || i >= conflictRetries {
			return nil, err
		}
	}
}

// nextRun is the time a task that handled its schedule up to last should
// next run, at now, by its MissedPolicy: zero when there is none.
func (e *Engine) nextRun(t *Task, last, now time.Time) time.Time {
	switch t.Trigger.Kind {
	case KindEvent:
		return time.Time{}
	case KindCondition:
		if next := last.Add(t.Trigger.Every); next.After(now) {
			return next
		}
		return now
	}
	runAt, ok, next := t.Trigger.Schedule.Due(last, now, t.Trigger.Missed, e.grace)
	if ok {
		return runAt
	}
	return next
}

// lastScheduled returns the newest run of t's schedule (not of RunNow)
// among its recent history.
func (e *Engine) lastScheduled(ctx context.Context, t *Task) (Run, bool) {
	return e.recentRun(ctx, t, func(r Run) bool { return r.ID == RunID(t.ID, r.DueAt) })
}
