package trigger

import (
	"errors"
	"fmt"
	"strings"
)

// ErrRefused is what an executor's error wraps when the run was refused
// before it did anything — a spend limit reached, a policy — and the
// refusal would not be different if the run were tried again at once
// (trigger/agentexec returns one for agent.ErrSpendRefused). Put the
// reason for the user, text to show as it is, in ExecResult.Result; the
// error itself is for operators.
//
// A refusal is an outcome of its own, not a failure: the engine records
// the run as [RunRefused] (its Result the user's reason, its Error the
// executor's error), does not try it again, does not count it toward
// DEAD, and moves the task on as after a success — a recurring task
// fires at its next time, a condition task on its next false→true edge,
// an event task on its next event — except that a one-time task, with
// no time left, ends EXPIRED rather than COMPLETED. The task's channel,
// when it has one (whatever the route), is told once, with the user's
// reason alone ([NotifyRefused]); nothing goes into memory or to a
// chained task. The Observer hears [LifecycleRefused].
var ErrRefused = errors.New("trigger: run refused")

// refused reports whether an attempt's error is a refusal (ErrRefused).
func refused(xerr error) bool {
	return xerr != nil && errors.Is(xerr, ErrRefused)
}

// refuse makes r, an attempt that ended with a refusal (finish recorded
// it as failed, with the executor's error), a refused run, its Result the
// reason the executor gave for the user.
func refuse(r Run, res ExecResult) Run {
	r.Status, r.Result = RunRefused, clip(res.Result)
	return r
}

// endStatus is the status of a schedule task left with no time after run
// r: COMPLETED, PENDING_APPROVAL while r waits, EXPIRED when r was
// refused (it never did its work).
func endStatus(r Run) Status {
	switch r.Status {
	case RunWaiting:
		return StatusPendingApproval
	case RunRefused:
		return StatusExpired
	}
	return StatusCompleted
}

// refusalText is what the task's channel is told of refused run r of t:
// the reason the executor gave for the user, never r.Error, which is for
// operators.
func refusalText(t *Task, r Run) string {
	if strings.TrimSpace(r.Result) != "" {
		return r.Result
	}
	return fmt.Sprintf("The task %q did not run this time: it was refused.", t.Name)
}
