package trigger

import (
	"context"
	"time"
)

// Idle reports whether the engine has nothing left to do at its clock's
// time, so that a test on a fake clock can wait for it before it looks at
// what happened or moves the clock on (trigger/triggertest.WaitIdle does
// the waiting). The engine is idle when, at once:
//
//   - no run is under way: none of the MaxConcurrent slots is held, no
//     scheduled task is being run or its condition checked, and no event
//     or chained run is queued for a slot — a run's notifications are
//     delivered before its slot is released, so they are done too;
//   - no task of the store is due at the clock's time (ACTIVE with a
//     NextRun at or before it), which the scheduler would start;
//   - no retry of an event or chained run, and no sweep of expired
//     approvals, has a wake-up at or before the clock's time that it has
//     not finished acting on;
//   - the bus holds no event, when it reports how many it holds (a
//     [MemoryBus]: queued, being handled or waiting to be delivered
//     again; see MemoryBus.Len).
//
// Idle is meant for an engine whose Run is under way: without it, a due
// task stays due and Idle stays false. With a Dispatcher store the due
// runs are the Dispatcher's to deliver (River works them by the
// database's clock), and Idle only knows those this engine is running.
// Observer events are delivered in the background and not waited for.
// The error is the store's.
func (e *Engine) Idle(ctx context.Context) (bool, error) {
	now := e.clock.Now()
	if !e.quiet(now) {
		return false, nil
	}
	if b, ok := e.bus.(interface{ Len() int }); ok && b.Len() > 0 {
		return false, nil
	}
	due, err := e.store.Due(ctx, now, 1)
	if err != nil {
		return false, err
	}
	if len(due) > 0 {
		return false, nil
	}
	// A run that started while the store was read holds a slot or a
	// claim by now: look again.
	return e.quiet(now), nil
}

// quiet reports whether no slot, claim or one-off goroutine is busy and
// no wake-up at or before now is pending.
func (e *Engine) quiet(now time.Time) bool {
	if len(e.sem) > 0 {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.running) > 0 || e.work > len(e.wakes) {
		return false
	}
	for _, at := range e.wakes {
		if !at.After(now) {
			return false
		}
	}
	return e.sweepAt.IsZero() || e.sweepAt.After(now)
}

// startWork counts a goroutine that runs a one-off run (an event's, a
// chained one, a resumed one) for Idle, from before it starts; the
// returned func ends it.
func (e *Engine) startWork() func() {
	e.mu.Lock()
	e.work++
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		e.work--
		e.mu.Unlock()
	}
}

// sleepUntil records that a one-off goroutine counted by startWork waits
// for a wake-up at at; the returned func, called once it is awake again,
// ends the record.
func (e *Engine) sleepUntil(at time.Time) func() {
	e.mu.Lock()
	e.wakeSeq++
	id := e.wakeSeq
	if e.wakes == nil {
		e.wakes = make(map[uint64]time.Time)
	}
	e.wakes[id] = at
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		delete(e.wakes, id)
		e.mu.Unlock()
	}
}

// setSweep records the wake-up of the approvals' sweep (zero: none
// pending, or its pass is done).
func (e *Engine) setSweep(at time.Time) {
	e.mu.Lock()
	e.sweepAt = at
	e.mu.Unlock()
}
