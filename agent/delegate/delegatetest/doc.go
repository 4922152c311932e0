// Package delegatetest is the conformance suite of delegate.Engine
// implementations, and a scripted delegate.Executor for tests.
//
// An implementation's test calls [Run] with a function returning a new
// engine on empty storage (running at most [Parallel] tasks at once,
// retrying an erroring run with short delays), and a durable one also
// [RunDurable], whose engines share storage as a restarted process or a
// replica would:
//
//	func TestConformance(t *testing.T) {
//		delegatetest.Run(t, func(t *testing.T) delegate.Engine {
//			m, err := delegate.NewMemory(delegate.MemoryConfig{Parallel: delegatetest.Parallel, RetryDelay: 10 * time.Millisecond})
//			if err != nil {
//				t.Fatal(err)
//			}
//			return m
//		})
//	}
//
// The suite checks, through the public API only: results stored before
// the task that made them is completed and before its dependants start;
// depends_on order; the parallel limit (runs held on channels, no
// sleeps); a failed task blocking its dependants transitively; retried
// runs and deliveries; the graph's budget; tenant isolation; Run's return
// when its ctx ends; untrusted text kept byte for byte; and, for durable
// engines, a restart finishing tasks and deliveries and two replicas
// running each task once. An engine that is a delegate.Canceller is
// checked to cancel a conversation's running graph at once (runs' ctx
// cancelled, outputs dropped, no delivery, later graphs unaffected), and
// a durable one to reach a run on another engine value and to run nothing
// of the graph after a restart; the other engines skip those checks.
//
// [ScriptedExecutor] runs tasks by a script (Step: text, status, errors,
// a gate channel), records runs and deliveries in order and counts the
// runs under way.
package delegatetest
