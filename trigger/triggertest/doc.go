// Package triggertest helps test code built on package trigger.
//
// The fake clock is clock/clocktest.Clock: hand one to trigger.Config.Clock
// and to everything else the test wires.
//
// [WaitIdle] waits until an engine has done everything its clock's time
// made due: call it after moving the fake clock or publishing an event,
// before looking at the runs.
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
