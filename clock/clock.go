package clock

import "time"

// Clock is the time valet reads and waits on. [System] is the real one;
// clock/clocktest.Clock is a fake that tests advance by hand.
// Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a Timer that delivers the time on its channel
	// once d has passed (at once when d ≤ 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a single wake-up from a Clock, like a time.Timer.
type Timer interface {
	// C returns the channel the time is delivered on; it holds at most
	// one value.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did
	// (false: it had fired or was stopped already).
	Stop() bool
}

// System is the machine's clock: time.Now and time.NewTimer. The zero
// value is ready to use.
type System struct{}

var _ Clock = System{}

// Now returns time.Now().
func (System) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer as a Timer.
func (System) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }

// Or returns c, or System when c is nil: what a Config's Clock field
// means when it is left nil.
func Or(c Clock) Clock {
	if c == nil {
		return System{}
	}
	return c
}
