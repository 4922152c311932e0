package trigger

import (
	"fmt"
	"time"
)

// MissedPolicy says what happens to schedule times that passed while
// nothing was running: the process was down, or every replica was. The
// zero value is CatchUpOnce.
type MissedPolicy int

const (
	// CatchUpOnce runs once for all the times missed, at the earliest of
	// them, then carries on from now.
	CatchUpOnce MissedPolicy = iota
	// Skip runs none of the times missed and carries on from now. A time
	// less than the grace (Due) ago is not missed: it still runs.
	Skip
)

// DefaultGrace is how late a schedule time may be handled and still
// count as on time, when Due is given no grace.
const DefaultGrace = time.Minute

// Check reports a value other than CatchUpOnce and Skip (ErrInvalid).
func (p MissedPolicy) Check() error {
	if p != CatchUpOnce && p != Skip {
		return fmt.Errorf("%w: missed-run policy %d", ErrInvalid, int(p))
	}
	return nil
}

// String returns "catch_up_once", "skip", or "MissedPolicy(n)".
func (p MissedPolicy) String() string {
	switch p {
	case CatchUpOnce:
		return "catch_up_once"
	case Skip:
		return "skip"
	}
	return fmt.Sprintf("MissedPolicy(%d)", int(p))
}

// Due tells a scheduler that wakes at now what to run. last is when the
// scheduler last called Due for this task (for a new task: when it was
// created): the schedule's times up to last are handled, those in
// (last, now] are due. After acting on the answer, record now as the next
// call's last and wake at next.
//
//   - Nothing due: ok is false and next is the schedule's next time.
//   - Times due: at most one run, whatever their number. With CatchUpOnce
//     it is for the earliest of them, runAt. With Skip it is for the
//     earliest one less than grace before now (grace ≤ 0: DefaultGrace);
//     when all are older, ok is false and none runs. Either way, next is
//     the first time after now: the others are dropped.
//   - next is zero when the schedule has no time left (a one-time
//     schedule that ran or was skipped): the task is finished.
//
// runAt depends on last and the schedule alone, never on when the
// scheduler woke, so replicas that wake at different instants agree on
// it: use it, with the task, as the run's unique key. An invalid
// schedule or policy has nothing due and no next time: check both when
// the task is created.
func (s Schedule) Due(last, now time.Time, p MissedPolicy, grace time.Duration) (runAt time.Time, ok bool, next time.Time) {
	c, err := s.compile()
	if err != nil || p.Check() != nil {
		return time.Time{}, false, time.Time{}
	}
	first, has := c.next(last)
	if !has {
		return time.Time{}, false, time.Time{}
	}
	if first.After(now) {
		return time.Time{}, false, first
	}
	next, _ = c.next(now)
	if p == CatchUpOnce {
		return first, true, next
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	// On time: later than now - grace. The earliest such time after last.
	from := now.Add(-grace)
	if from.Before(last) {
		from = last
	}
	if t, has := c.next(from); has && !t.After(now) {
		return t, true, next
	}
	return time.Time{}, false, next
}
