package trigger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// subscribeRetry is the wait before subscribing again after the bus
// failed.
const subscribeRetry = 5 * time.Second

// EventRunID returns the id of the run of task taskID that event eventID
// fired: the same on every replica and every delivery of the event.
func EventRunID(taskID, eventID string) string {
	return taskID + "@event:" + eventID
}

// Publish hands ev to the engine's bus (Config.Bus). It fails with
// ErrInvalid for an invalid event; otherwise the event fires, on whichever
// replica's Run receives it, the ACTIVE event tasks of ev.TenantID whose
// trigger it matches ([Trigger.Matches]), each once per event ID.
func (e *Engine) Publish(ctx context.Context, ev Event) error {
	return e.bus.Publish(ctx, ev)
}

// subscribe delivers the bus's events to handleEvent until ctx ends,
// subscribing again after a failure.
func (e *Engine) subscribe(ctx context.Context, wg *sync.WaitGroup) {
	for ctx.Err() == nil {
		err := e.bus.Subscribe(ctx, func(ctx context.Context, ev Event) error {
			return e.handleEvent(ctx, ev, wg)
		})
		if err == nil || ctx.Err() != nil {
			return
		}
		e.log.Error("trigger: event bus", "err", err)
		tm := e.clock.NewTimer(subscribeRetry)
		select {
		case <-tm.C():
		case <-ctx.Done():
		}
		tm.Stop()
	}
}

// handleEvent fires the tenant's ACTIVE event tasks that ev matches. It
// returns an error, so that the bus delivers ev again, when it could not
// queue a run; a run already queued for the event is not queued twice.
func (e *Engine) handleEvent(ctx context.Context, ev Event, wg *sync.WaitGroup) error {
	if err := ev.Check(); err != nil {
		e.log.Warn("trigger: dropping an invalid event", "err", err)
		return nil
	}
	tasks, err := e.store.List(ctx, ev.TenantID, StatusActive)
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range tasks {
		if t.Trigger.Kind != KindEvent || !t.Trigger.Matches(ev) {
			continue
		}
		if err := e.fireEvent(ctx, t, ev, wg); err != nil {
			errs = append(errs, fmt.Errorf("task %q: %w", t.ID, err))
		}
	}
	return errors.Join(errs...)
}

// fireEvent queues the run of t that ev fires: with a Dispatcher through
// Enqueue, in memory as a goroutine holding one of the MaxConcurrent
// slots (so a flood of events waits for slots rather than piling up
// goroutines).
func (e *Engine) fireEvent(ctx context.Context, t *Task, ev Event, wg *sync.WaitGroup) error {
	now := e.clock.Now()
	if disp, ok := e.store.(Dispatcher); ok {
		return disp.Enqueue(ctx, Due{
			TenantID: t.TenantID, TaskID: t.ID, DueAt: now,
			Attempt: 1, MaxAttempts: t.Retry.Attempts(), Event: &ev,
		})
	}
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	r := Run{
		ID: EventRunID(t.ID, ev.ID), TaskID: t.ID, TenantID: t.TenantID, DueAt: now,
		Status: RunRunning, StartedAt: now, Attempt: 1,
	}
	if err := e.store.AddRun(ctx, r); err != nil {
		<-e.sem
		if errors.Is(err, ErrConflict) {
			return nil // this event fired this task already
		}
		return err
	}
	wg.Go(func() {
		defer e.notify()
		defer func() { <-e.sem }()
		e.runOneOff(ctx, t, r, &ev, nil)
	})
	return nil
}

// runOneOff carries out in memory the run r of t that an event (ev) or a
// chained run (prev) started, with the task's attempts and backoff. The
// last failed attempt makes the task DEAD; a task paused or deleted
// meanwhile gets no further attempt.
func (e *Engine) runOneOff(ctx context.Context, t *Task, r Run, ev *Event, prev *Previous) {
	log := e.log.With("tenant", t.TenantID, "task", t.ID, "run", r.ID)
	for {
		e.observe(LifecycleStarted, t, r)
		var res ExecResult
		var xerr error
		if ex, ok := e.executors[t.ExecutorName()]; ok {
			res, xerr = e.execute(ctx, ex, t, r, ev, prev)
		} else {
			xerr = fmt.Errorf("%w: no executor %q", ErrInvalid, t.ExecutorName())
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		r = e.finish(r, res, xerr)
		var err error
		switch {
		case xerr == nil:
			if err = e.store.UpdateRun(wctx, r); err == nil {
				_, err = e.mutate(wctx, t.TenantID, t.ID, func(t *Task) error {
					t.LastRun = r.StartedAt
					return nil
				})
			}
		case ctx.Err() != nil:
			r.Error = clip("interrupted: " + r.Error)
			err = e.store.UpdateRun(wctx, r)
		case r.Attempt >= t.Retry.Attempts():
			r.Status = RunDead
			if err = e.store.UpdateRun(wctx, r); err == nil {
				_, err = e.mutate(wctx, t.TenantID, t.ID, func(t *Task) error {
					if t.Status == StatusActive {
						t.Status, t.NextRun = StatusDead, time.Time{}
					}
					return nil
				})
			}
		default:
			err = e.store.UpdateRun(wctx, r)
		}
		cancel()
		if err != nil {
			log.Error("trigger: recording a run", "err", err)
		}
		if ctx.Err() != nil {
			return
		}
		e.ended(ctx, t, r, res, prev)
		if r.Status != RunFailed {
			return
		}
		tm := e.clock.NewTimer(t.Retry.Delay(r.Attempt))
		select {
		case <-tm.C():
		case <-ctx.Done():
		}
		tm.Stop()
		if ctx.Err() != nil {
			return
		}
		cur, err := e.store.Get(ctx, t.TenantID, t.ID)
		if err != nil || cur.Status != StatusActive {
			return
		}
		t = cur
		r.Attempt++
		r.Status, r.StartedAt, r.FinishedAt = RunRunning, e.clock.Now(), time.Time{}
		r.Error, r.Result, r.Consumed = "", "", Usage{}
		if err := e.store.UpdateRun(ctx, r); err != nil {
			log.Error("trigger: recording a run", "err", err)
			return
		}
	}
}

// handleOneOff is HandleDue for a run a Dispatcher delivers that an
// event or a chained run started.
func (e *Engine) handleOneOff(ctx context.Context, disp Dispatcher, d Due) error {
	t, err := e.store.Get(ctx, d.TenantID, d.TaskID)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: task %q is gone", ErrStale, d.TaskID)
	}
	if err != nil {
		return err
	}
	id := ""
	switch {
	case t.Status != StatusActive:
		return fmt.Errorf("%w: task %q is %s", ErrStale, t.ID, t.Status)
	case d.Event != nil && t.Trigger.Kind != KindEvent:
		return fmt.Errorf("%w: task %q is a %s task", ErrStale, t.ID, t.Trigger.Kind)
	case d.Event != nil:
		id = EventRunID(t.ID, d.Event.ID)
	default:
		id = ChainRunID(t.ID, d.Previous.RunID)
	}
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.sem }()
	r := Run{
		ID: id, TaskID: t.ID, TenantID: t.TenantID, DueAt: d.DueAt,
		Status: RunRunning, StartedAt: e.clock.Now(), Attempt: max(d.Attempt, 1),
	}
	if err = e.store.AddRun(ctx, r); errors.Is(err, ErrConflict) {
		err = e.store.UpdateRun(ctx, r) // a later attempt
	}
	if err != nil {
		return err
	}
	e.observe(LifecycleStarted, t, r)
	var res ExecResult
	var xerr error
	if ex, ok := e.executors[t.ExecutorName()]; ok {
		res, xerr = e.execute(ctx, ex, t, r, d.Event, d.Previous)
	} else {
		xerr = fmt.Errorf("%w: no executor %q", ErrInvalid, t.ExecutorName())
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	r = e.finish(r, res, xerr)
	switch {
	case xerr != nil && errors.Is(ctx.Err(), context.Canceled):
		r.Error = clip("interrupted: " + r.Error)
		return errors.Join(xerr, e.store.UpdateRun(wctx, r))
	case xerr != nil && r.Attempt < d.MaxAttempts:
		err := e.store.UpdateRun(wctx, r)
		e.ended(ctx, t, r, res, d.Previous)
		return errors.Join(xerr, err)
	case xerr != nil:
		r.Status = RunDead
	}
	err = e.finishTask(wctx, disp, t, r, func(t *Task) {
		if r.Status == RunDead {
			t.Status, t.NextRun = StatusDead, time.Time{}
			return
		}
		t.LastRun = r.StartedAt
	})
	if err == nil {
		e.ended(ctx, t, r, res, d.Previous)
	}
	return errors.Join(xerr, err)
}
