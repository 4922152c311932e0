package trigger

import "time"

// Clock is the time a scheduler reads and waits on. SystemClock is the
// real one; trigger/triggertest.Clock is a fake that tests advance by
// hand, so schedules run without sleeping. Implementations are safe for
// concurrent use.
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

// SystemClock is the machine's clock: time.Now and time.NewTimer. The
// zero value is ready to use.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer as a Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
