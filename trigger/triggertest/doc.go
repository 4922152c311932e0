// Package triggertest helps test code built on package trigger.
//
// [Clock] is a fake trigger.Clock: time stands still until the test
// moves it with Advance, and the timers it passes fire at once, so a
// scheduler runs a week of schedules in a millisecond:
//
//	clk := triggertest.NewClock(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC))
//	// start the code under test with clk as its trigger.Clock, then:
//	if err := clk.AwaitTimers(ctx, 1); err != nil { // it is waiting
//		t.Fatal(err)
//	}
//	clk.Advance(24 * time.Hour) // its timer fires
//
// [RunStore] is the conformance suite of a trigger.Store: a backend's
// tests call it with a function that makes an empty store, and it checks
// tenant isolation, copies, revisions under concurrent updates, the
// order of Due, status filters, the bounds and order of run history,
// and that a run in every trigger.RunStatus (RunRefused included) reads
// back as it was written.
// [NewTask] and [NewRun] return valid values to start tests from.
//
//	func TestMyStore(t *testing.T) {
//		triggertest.RunStore(t, func(t *testing.T) trigger.Store { return newMyStore(t) })
//	}
package triggertest
