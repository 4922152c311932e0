package trigger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrStale is what [Engine.HandleDue] returns for a run that is no longer
// wanted: its task was deleted, is not ACTIVE, or is due at another time.
// A Dispatcher drops such a run without trying it again.
var ErrStale = errors.New("trigger: stale run")

// Dispatcher is a Store that delivers due runs itself, durably, in place
// of the engine's polling of Due: trigger/rivertrigger is one. When
// Config.Store is a Dispatcher, [Engine.Run] calls Dispatch with the
// engine as the DueHandler. A Dispatcher's Create and Update queue the
// run of a task that is ACTIVE with a NextRun, due at NextRun, once per
// task and due time however often they are called, on however many
// replicas.
type Dispatcher interface {
	Store
	// Dispatch delivers due runs to h, each attempt once, until ctx ends;
	// it returns nil after the attempts under way, whose contexts are
	// cancelled, have returned. An attempt h fails (an error other than
	// ErrStale) is tried again, by the Dispatcher's own schedule of
	// retries, until Due.MaxAttempts; a run it loses without h having
	// finished the last attempt (a worker that died on it) it reports to
	// h.HandleLost.
	Dispatch(ctx context.Context, h DueHandler) error
	// Enqueue queues a one-off run to run now: of an event task
	// (d.Event set), once per (task, event id), or chained after another
	// run (d.Previous set), once per (task, previous run), however often
	// it is called.
	Enqueue(ctx context.Context, d Due) error
	// Finish records r, the end of an attempt, and updates t (as
	// Store.Update, ErrConflict when t.Revision is not the stored one)
	// in one transaction: both or neither.
	Finish(ctx context.Context, r Run, t *Task) error
}

// DueHandler handles the runs a Dispatcher delivers. The Engine is one.
type DueHandler interface {
	// HandleDue carries out one attempt of d. It returns nil when the
	// run succeeded or was refused (RunRefused: not to be tried again),
	// ErrStale when the run is no longer wanted, and the
	// attempt's error otherwise; after the last attempt
	// (d.Attempt >= d.MaxAttempts) the task is DEAD by then.
	HandleDue(ctx context.Context, d Due) error
	// HandleLost records that the dispatcher gave d up without an attempt
	// finishing it: the task becomes DEAD, the run dead with reason. It
	// does nothing when the task has moved on, so it may be called more
	// than once.
	HandleLost(ctx context.Context, d Due, reason string) error
}

// Due is one attempt of a run a Dispatcher delivers.
type Due struct {
	TenantID, TaskID string
	// DueAt is the run's due time: the task's NextRun when it was queued.
	DueAt time.Time
	// Attempt counts this run's attempts, from 1; MaxAttempts is the
	// last one the dispatcher makes.
	Attempt, MaxAttempts int
	// Event is the event that fired an event task, nil for a schedule
	// or a condition. Its run's id is EventRunID, and DueAt is when it
	// was queued.
	Event *Event
	// Previous is set for a run another task's run chained to
	// (RouteChain); its id is ChainRunID, and DueAt is when it was
	// queued.
	Previous *Previous
}

// HandleDue carries out one attempt of a run a Dispatcher delivers: it
// runs the task, when it is still ACTIVE and due at d.DueAt, through its
// executor, records the attempt in the run history under the run's stable
// id, and moves the task on to its next time (in one Finish with the
// run's record). The last failed attempt makes the run dead and the task
// DEAD; a refused one (ErrRefused) is recorded as RunRefused, moves the
// task on and returns nil. An attempt cut short because ctx ended is recorded as failed
// ("interrupted") and leaves the task as it was.
func (e *Engine) HandleDue(ctx context.Context, d Due) error {
	disp, ok := e.store.(Dispatcher)
	if !ok {
		return fmt.Errorf("%w: HandleDue needs a Dispatcher store", ErrUnsupported)
	}
	if d.Event != nil || d.Previous != nil {
		return e.handleOneOff(ctx, disp, d)
	}
	t, err := e.store.Get(ctx, d.TenantID, d.TaskID)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: task %q is gone", ErrStale, d.TaskID)
	}
	if err != nil {
		return err
	}
	if t.Status != StatusActive || !t.NextRun.Equal(d.DueAt) {
		return fmt.Errorf("%w: task %q is %s, next due %s, not %s", ErrStale, t.ID, t.Status,
			t.NextRun.Format(time.RFC3339Nano), d.DueAt.Format(time.RFC3339Nano))
	}
	k := taskKey{t.TenantID, t.ID}
	if !e.claim(k) {
		return fmt.Errorf("%w: task %q has a run under way", ErrConflict, t.ID)
	}
	defer e.notify()
	defer e.release(k)
	if err := e.acquire(ctx); err != nil {
		return err
	}
	defer e.releaseSlot()

	r := e.dueRun(t, RunID(t.ID, d.DueAt), d)
	_, retry := e.findRun(ctx, t, r.ID)
	if skip, err := e.skipMissed(ctx, t, d, retry || d.Attempt > 1); skip || err != nil {
		return err
	}
	if t.Trigger.Kind == KindCondition && !retry {
		// A poll; a run follows on a false→true edge, and its later
		// attempts do not poll again.
		if edge, err := e.pollEdge(ctx, t, d.DueAt); !edge {
			return err
		}
	}
	moved, err := e.runDue(ctx, disp, t, r, d, func(t *Task) {
		t.LastRun = r.StartedAt
		t.NextRun = e.nextRun(t, r.StartedAt, e.clock.Now())
		t.ConditionMet = t.ConditionMet || t.Trigger.Kind == KindCondition
	})
	if moved != nil {
		e.scheduled(moved)
	}
	return err
}

// skipMissed applies the Skip policy to a scheduled run a Dispatcher
// delivers a grace or more after its time (every replica was down, or
// the queue stalled), as the polling scheduler does: the run does not
// happen, and the task moves on to the first of its times still on time
// (less than the grace ago), else to its next time, else, with none left,
// ends EXPIRED. It reports whether it skipped the run. A later attempt of
// a run that started (retry) is not a missed time.
func (e *Engine) skipMissed(ctx context.Context, t *Task, d Due, retry bool) (bool, error) {
	now := e.clock.Now()
	if t.Trigger.Kind != KindSchedule || t.Trigger.Missed != Skip || retry || now.Sub(d.DueAt) < e.grace {
		return false, nil
	}
	runAt, ok, next := t.Trigger.Schedule.Due(d.DueAt.Add(-time.Nanosecond), now, Skip, e.grace)
	if ok {
		next = runAt
	}
	moved, err := e.mutate(ctx, t.TenantID, t.ID, func(t *Task) error {
		if t.Status != StatusActive || !t.NextRun.Equal(d.DueAt) {
			return nil // changed meanwhile; a no-op update is harmless
		}
		t.NextRun = next
		if next.IsZero() {
			t.Status = StatusExpired
		}
		return nil
	})
	if err != nil {
		return true, err
	}
	e.scheduled(moved)
	return true, nil
}

// dueRun is the run of t with id that d delivers, starting now.
func (e *Engine) dueRun(t *Task, id string, d Due) Run {
	return Run{
		ID: id, TaskID: t.ID, TenantID: t.TenantID, DueAt: d.DueAt,
		Status: RunRunning, StartedAt: e.clock.Now(), Attempt: max(d.Attempt, 1),
	}
}

// runDue carries out one attempt of run r of t that a Dispatcher
// delivered (d), holding a slot, and records its outcome. An attempt cut
// short because ctx was cancelled (the engine stopping) is recorded as
// interrupted; a failure with attempts left is recorded and returned for
// the dispatcher to try again; the last failure makes the task DEAD;
// otherwise (a refusal too, which is not returned) moveOn updates the
// task (a one-time task with no time left is COMPLETED, PENDING_APPROVAL
// while its run waits, EXPIRED when it was refused), in one Finish with
// the run's record. It returns the task as it was finished, nil when it
// was not, and the attempt's error.
func (e *Engine) runDue(ctx context.Context, disp Dispatcher, t *Task, r Run, d Due, moveOn func(*Task)) (*Task, error) {
	err := e.store.AddRun(ctx, r)
	if errors.Is(err, ErrConflict) {
		err = e.store.UpdateRun(ctx, r) // a later attempt
	}
	if err != nil {
		return nil, err
	}
	r, res, xerr := e.attempt(ctx, t, r, d.Event, d.Previous)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	switch {
	case xerr != nil && errors.Is(ctx.Err(), context.Canceled):
		// Stopping (a dispatcher's deadline on the attempt is a failure).
		r.Error = clip("interrupted: " + r.Error)
		return nil, errors.Join(xerr, e.store.UpdateRun(wctx, r))
	case refused(xerr):
		r, xerr = refuse(r, res), nil // an outcome: the dispatcher does not try it again
	case xerr != nil && r.Attempt < d.MaxAttempts:
		err := e.store.UpdateRun(wctx, r)
		e.ended(ctx, t, r, res, d.Previous)
		return nil, errors.Join(xerr, err)
	case xerr != nil:
		r.Status = RunDead
	}
	done, err := e.finishTask(wctx, disp, t, r, func(t *Task) {
		if r.Status == RunDead {
			t.Status, t.NextRun = StatusDead, time.Time{}
			return
		}
		moveOn(t)
		if t.NextRun.IsZero() && t.Status == StatusActive && t.Trigger.Kind == KindSchedule {
			t.Status = endStatus(r)
		}
	})
	if err != nil {
		return nil, errors.Join(xerr, err)
	}
	if done == nil { // rescheduled meanwhile: the run, recorded alone, still goes along t's route
		e.endedAs(ctx, t, r, res, d.Previous, r.Status != RunDead && e.notifiesQueued(wctx))
		return nil, xerr
	}
	e.finished(ctx, done, r, res, d.Previous)
	return done, xerr
}

// acquire takes one of the MaxConcurrent slots, or fails when ctx ends
// first; releaseSlot gives it back.
func (e *Engine) acquire(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Engine) releaseSlot() { <-e.sem }

// pollEdge polls the condition of t, due at dueAt, and reports a
// false→true edge, which the caller runs. Otherwise it records what the
// check said and moves NextRun on by the trigger's interval. A check that
// fails or panics is logged and changes nothing but NextRun.
func (e *Engine) pollEdge(ctx context.Context, t *Task, dueAt time.Time) (bool, error) {
	met, err := e.check(ctx, t)
	if err != nil {
		e.log.Warn("trigger: condition check", "tenant", t.TenantID, "task", t.ID,
			"condition", t.Trigger.Condition, "err", err)
		met = t.ConditionMet
	}
	if met && !t.ConditionMet {
		return true, nil
	}
	now := e.clock.Now()
	_, err = e.mutate(ctx, t.TenantID, t.ID, func(t *Task) error {
		if t.Status != StatusActive || !t.NextRun.Equal(dueAt) {
			return nil // changed meanwhile; a no-op update is harmless
		}
		t.ConditionMet = met
		t.NextRun = e.nextRun(t, dueAt, now)
		return nil
	})
	return false, err
}

// check calls the condition of t with the run timeout, recovering a
// panic.
func (e *Engine) check(ctx context.Context, t *Task) (met bool, err error) {
	c := e.conditions[t.Trigger.Condition]
	if c == nil {
		return false, fmt.Errorf("%w: no condition %q", ErrInvalid, t.Trigger.Condition)
	}
	ctx, cancel := context.WithTimeout(ctx, e.runTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			met, err = false, fmt.Errorf("trigger: condition %q panicked: %v", t.Trigger.Condition, p)
		}
	}()
	return c(ctx, t.Clone())
}

// findRun returns the run id among t's recent runs.
func (e *Engine) findRun(ctx context.Context, t *Task, id string) (Run, bool) {
	return e.recentRun(ctx, t, func(r Run) bool { return r.ID == id })
}

// recentRun returns the newest of t's recent runs that match accepts.
func (e *Engine) recentRun(ctx context.Context, t *Task, match func(Run) bool) (Run, bool) {
	runs, err := e.store.Runs(ctx, t.TenantID, t.ID, 20)
	if err != nil {
		return Run{}, false
	}
	for _, r := range runs {
		if match(r) {
			return r, true
		}
	}
	return Run{}, false
}

// HandleLost makes the task of a run the dispatcher gave up DEAD, with the
// run dead and its error reason, if the task is still ACTIVE and due at
// d.DueAt, and tells it as any DEAD task: LifecycleDead to the Observer,
// NotifyFailure to the task's channel. A run recorded as ended, and an
// event's or a chained run with no record older than the task's recorded
// runs (a task revived since), change nothing.
func (e *Engine) HandleLost(ctx context.Context, d Due, reason string) error {
	disp, ok := e.store.(Dispatcher)
	if !ok {
		return fmt.Errorf("%w: HandleLost needs a Dispatcher store", ErrUnsupported)
	}
	t, err := e.store.Get(ctx, d.TenantID, d.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	id := RunID(t.ID, d.DueAt)
	due := t.NextRun.Equal(d.DueAt)
	oneOff := d.Event != nil || d.Previous != nil
	switch {
	case d.Event != nil:
		id, due = EventRunID(t.ID, d.Event.ID), t.Trigger.Kind == KindEvent
	case d.Previous != nil:
		id, due = ChainRunID(t.ID, d.Previous.RunID), true
	}
	if t.Status != StatusActive || !due || e.isRunning(taskKey{t.TenantID, t.ID}) {
		return nil
	}
	// The whole kept history, not a page of it: a dispatcher reads an old
	// discarded job again (rivertrigger's reconciler after a restart) when
	// the task has run many times since.
	runs, err := e.store.Runs(ctx, t.TenantID, t.ID, 0)
	if err != nil {
		return err
	}
	var old Run
	found, newer := false, false
	for _, r := range runs {
		if r.ID == id {
			old, found = r, true
			break
		}
		newer = newer || r.DueAt.After(d.DueAt)
	}
	switch {
	case found && old.Status != RunRunning && old.Status != RunFailed:
		return nil // it ended after all
	case !found && oneOff && newer:
		// An event's or a chained run with no record while later runs
		// have one: a task that has run since (revived with Retry, or
		// its history turned over) is not made DEAD for an old loss.
		e.log.Warn("trigger: a lost run older than the task's history; the task is left as it is",
			"tenant", t.TenantID, "task", t.ID, "run", id, "reason", clip(reason))
		return nil
	}
	now := e.clock.Now()
	r := Run{
		ID: id, TaskID: t.ID, TenantID: t.TenantID, DueAt: d.DueAt,
		Status: RunRunning, StartedAt: now, Attempt: max(d.Attempt, 1),
	}
	if found {
		r = old
	} else if err := e.store.AddRun(ctx, r); err != nil && !errors.Is(err, ErrConflict) {
		return err
	}
	r.Status, r.Error = RunDead, clip(reason)
	if r.Error == "" {
		r.Error = "lost"
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.FinishedAt = now
	if now.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt
	}
	dead, err := e.finishTask(ctx, disp, t, r, func(t *Task) {
		t.Status, t.NextRun = StatusDead, time.Time{}
	})
	if err != nil || dead == nil {
		return err // not recorded, or rescheduled meanwhile: the task is not DEAD
	}
	// Told as any DEAD task: the Observer hears it, the channel is told
	// (NotifyFailure).
	e.finished(ctx, dead, r, ExecResult{}, d.Previous)
	return nil
}

// finishTask records r and applies f to t in one Finish, reading t again
// on ErrConflict while it is still due at r.DueAt.
func (e *Engine) finishTask(ctx context.Context, disp Dispatcher, t *Task, r Run, f func(*Task)) (*Task, error) {
	for i := 0; ; i++ {
		f(t)
		err := disp.Finish(ctx, r, t)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, ErrConflict) || i >= conflictRetries {
			return nil, err
		}
		if t, err = e.store.Get(ctx, r.TenantID, r.TaskID); err != nil {
			return nil, err
		}
		if t.Trigger.Kind != KindEvent && !t.NextRun.Equal(r.DueAt) {
			// Rescheduled meanwhile: keep the change, record the run
			// alone. A task paused meanwhile still moves on past the
			// due time that ran, so that Resume does not run it again.
			_, err := e.recordAlone(ctx, disp, r)
			return nil, err
		}
	}
}
