package trigger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// subscribeRetry is the wait before subscribing again after the bus
// failed.
const subscribeRetry = 5 * time.Second

// EventRunID returns the id of the run of task taskID that event eventID
// fired: the same on every replica and every delivery of the event. An id
// that would exceed MaxIDLen is shortened with a hash (fitID).
func EventRunID(taskID, eventID string) string {
	return fitID(taskID + "@event:" + eventID)
}

// fitID returns id when it fits MaxIDLen, otherwise its first bytes and
// the SHA-256 of the whole: the same for the same id, distinct for
// distinct ones.
func fitID(id string) string {
	if len(id) <= MaxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	head := id[:MaxIDLen-1-2*sha256.Size]
	for !utf8.ValidString(head) {
		head = head[:len(head)-1]
	}
	return head + "#" + hex.EncodeToString(sum[:])
}

// maxSeenEvents is how many event runs an engine on a store that is not a
// Dispatcher remembers having fired, beside the run history, so that a
// redelivered event does not fire again.
const maxSeenEvents = 4096

// seen reports whether the run key was fired already, and notes it.
func (e *Engine) seen(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.seenSet[key]; ok {
		return true
	}
	if len(e.seenRing) == maxSeenEvents {
		delete(e.seenSet, e.seenRing[0])
		e.seenRing = e.seenRing[1:]
	}
	e.seenRing = append(e.seenRing, key)
	e.seenSet[key] = struct{}{}
	return false
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
// goroutines). Each task gets its own copy of the event.
func (e *Engine) fireEvent(ctx context.Context, t *Task, ev Event, wg *sync.WaitGroup) error {
	ev = ev.clone()
	now := e.clock.Now()
	if disp, ok := e.store.(Dispatcher); ok {
		return disp.Enqueue(ctx, Due{
			TenantID: t.TenantID, TaskID: t.ID, DueAt: now,
			Attempt: 1, MaxAttempts: t.Retry.Attempts(), Event: &ev,
		})
	}
	r := Run{
		ID: EventRunID(t.ID, ev.ID), TaskID: t.ID, TenantID: t.TenantID, DueAt: now,
		Status: RunRunning, StartedAt: now, Attempt: 1,
	}
	if err := e.acquire(ctx); err != nil {
		return err
	}
	if e.seen(t.TenantID + "\x00" + r.ID) {
		e.releaseSlot()
		return nil // this event fired this task already
	}
	if err := e.store.AddRun(ctx, r); err != nil {
		e.releaseSlot()
		if errors.Is(err, ErrConflict) {
			return nil // this event fired this task already
		}
		e.forget(t.TenantID + "\x00" + r.ID)
		return err
	}
	done := e.startWork()
	wg.Go(func() {
		defer done()
		defer e.notify()
		e.runOneOff(ctx, t, r, &ev, nil, true)
	})
	return nil
}

// forget undoes seen for a run that could not be queued.
func (e *Engine) forget(key string) {
	e.mu.Lock()
	delete(e.seenSet, key)
	e.mu.Unlock()
}

// clone returns ev with a deep copy of its Data (through JSON, as the
// buses deliver it), so that the tasks one event fires do not share a
// map.
func (ev Event) clone() Event {
	b, err := EncodeEvent(ev)
	if err != nil {
		return ev // it came through a bus, encoded once already
	}
	c, err := DecodeEvent(b)
	if err != nil {
		return ev
	}
	return c
}

// oneOff is a one-off run in memory that the engine's stop interrupted,
// to run again at the next Run.
type oneOff struct {
	t    *Task
	r    Run
	ev   *Event
	prev *Previous
}

// runOneOff carries out in memory the run r of t that an event (ev) or a
// chained run (prev) started, with the task's attempts and backoff. The
// last failed attempt makes the task DEAD; a refused one ends the run
// (RunRefused) and leaves the task ACTIVE; a task paused or deleted
// meanwhile gets no further attempt; a run the engine's stop interrupts
// runs again at the next Run. With slot set, it holds one of the
// MaxConcurrent slots on entry, gives it up while it waits out a backoff
// and when it returns; otherwise it runs under its caller's slot.
func (e *Engine) runOneOff(ctx context.Context, t *Task, r Run, ev *Event, prev *Previous, slot bool) {
	held := slot
	defer func() {
		if held {
			e.releaseSlot()
		}
	}()
	log := e.log.With("tenant", t.TenantID, "task", t.ID, "run", r.ID)
	for {
		var res ExecResult
		var xerr error
		r, res, xerr = e.attempt(ctx, t, r, ev, prev)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		var err error
		if refused(xerr) && ctx.Err() == nil {
			r, xerr = refuse(r, res), nil // an outcome: recorded as a success is, not tried again
		}
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
			e.park(oneOff{t, r, ev, prev})
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
		if held { // nobody waits on a backoff holding a slot
			e.releaseSlot()
			held = false
		}
		delay := t.Retry.Delay(r.Attempt)
		awake := func() {}
		if slot { // a goroutine counted by startWork: Idle knows it sleeps
			awake = e.sleepUntil(e.clock.Now().Add(delay))
		}
		tm := e.clock.NewTimer(delay)
		select {
		case <-tm.C():
		case <-ctx.Done():
		}
		tm.Stop()
		awake()
		if ctx.Err() != nil {
			e.park(oneOff{t, r, ev, prev})
			return
		}
		if slot {
			if e.acquire(ctx) != nil {
				e.park(oneOff{t, r, ev, prev})
				return
			}
			held = true
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

// park keeps a one-off run the engine's stop interrupted for the next
// Run.
func (e *Engine) park(o oneOff) {
	e.mu.Lock()
	e.interrupted = append(e.interrupted, o)
	e.mu.Unlock()
}

// resumeInterrupted starts again, at the start of Run, the one-off runs
// the previous Run's stop interrupted: as the same attempt, or the next
// one when it was waiting out a backoff.
func (e *Engine) resumeInterrupted(ctx context.Context, wg *sync.WaitGroup) {
	e.mu.Lock()
	list := e.interrupted
	e.interrupted = nil
	e.mu.Unlock()
	for _, o := range list {
		done := e.startWork()
		wg.Go(func() {
			defer done()
			if e.acquire(ctx) != nil {
				e.park(o)
				return
			}
			t, err := e.store.Get(ctx, o.t.TenantID, o.t.ID)
			if err != nil || t.Status != StatusActive {
				e.releaseSlot() // deleted or paused meanwhile: no further attempt
				return
			}
			o.t = t
			r := o.r
			if r.Status == RunFailed && !strings.HasPrefix(r.Error, "interrupted: ") {
				r.Attempt++ // it was waiting out a backoff
			}
			r.Status, r.StartedAt, r.FinishedAt = RunRunning, e.clock.Now(), time.Time{}
			r.Error, r.Result, r.Consumed = "", "", Usage{}
			if err := e.store.UpdateRun(ctx, r); err != nil {
				e.releaseSlot()
				e.log.Error("trigger: resuming an interrupted run", "run", r.ID, "err", err)
				return
			}
			e.runOneOff(ctx, o.t, r, o.ev, o.prev, true)
		})
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
	if err := e.acquire(ctx); err != nil {
		return err
	}
	defer e.releaseSlot()
	r := e.dueRun(t, id, d)
	_, err = e.runDue(ctx, disp, t, r, d, func(t *Task) { t.LastRun = r.StartedAt })
	return err
}
