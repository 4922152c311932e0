package trigger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
)

// fire handles one due task: a pending retry, a run of its schedule, or a
// skipped time.
func (e *Engine) fire(ctx context.Context, due *Task) {
	log := e.log.With("tenant", due.TenantID, "task", due.ID)
	if err := e.fireOnce(ctx, due); err != nil && ctx.Err() == nil {
		log.Error("trigger: run", "err", err)
		if !errors.Is(err, ErrNotFound) { // throttle a failing store
			tm := e.clock.NewTimer(storeErrorDelay)
			select {
			case <-tm.C():
			case <-ctx.Done():
			}
			tm.Stop()
		}
	}
}

func (e *Engine) fireOnce(ctx context.Context, due *Task) error {
	t, err := e.store.Get(ctx, due.TenantID, due.ID)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	if t.Status != StatusActive || t.NextRun.IsZero() || t.NextRun.After(now) {
		return nil // changed since Due
	}
	var r Run
	retry := false
	if prev, ok := e.lastScheduled(ctx, t); ok && (prev.Status == RunFailed || prev.Status == RunRunning) {
		r, retry = prev, true
		r.Attempt++
	} else {
		dueAt := t.NextRun
		if t.Trigger.Kind == KindCondition {
			if edge, err := e.pollEdge(ctx, t, dueAt); !edge {
				return err
			}
		} else if now.Sub(dueAt) >= e.grace && t.Trigger.Missed == Skip {
			runAt, ok, next := t.Trigger.Schedule.Due(dueAt.Add(-time.Nanosecond), now, Skip, e.grace)
			if !ok {
				_, err := e.mutate(ctx, t.TenantID, t.ID, func(t *Task) error {
					t.NextRun = next
					if next.IsZero() && t.Status == StatusActive {
						t.Status = StatusExpired
					}
					return nil
				})
				return err
			}
			dueAt = runAt
		}
		r = Run{ID: RunID(t.ID, dueAt), TaskID: t.ID, TenantID: t.TenantID, DueAt: dueAt, Attempt: 1}
	}
	r.Status, r.StartedAt, r.FinishedAt = RunRunning, now, time.Time{}
	r.Error, r.Result, r.Consumed = "", "", Usage{}
	if retry {
		err = e.store.UpdateRun(ctx, r)
	} else if err = e.store.AddRun(ctx, r); errors.Is(err, ErrConflict) {
		err = e.store.UpdateRun(ctx, r) // the same due time again, after Retry
	}
	if err != nil {
		return err
	}
	r, res, xerr := e.attempt(ctx, t, r, nil, nil)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if xerr != nil && ctx.Err() != nil {
		// The engine is stopping: keep the task due, so that the next
		// start retries this run.
		r.Error = clip("interrupted: " + r.Error)
		return e.store.UpdateRun(wctx, r)
	}
	if refused(xerr) {
		r = refuse(r, res)
	} else if xerr != nil && r.Attempt >= t.Retry.Attempts() {
		r.Status = RunDead
	}
	if err := e.store.UpdateRun(wctx, r); err != nil {
		return err
	}
	_, err = e.mutate(wctx, t.TenantID, t.ID, func(t *Task) error {
		switch {
		case xerr == nil || r.Status == RunRefused:
			t.LastRun = r.StartedAt
			t.NextRun = e.nextRun(t, r.StartedAt, r.FinishedAt)
			t.ConditionMet = t.ConditionMet || t.Trigger.Kind == KindCondition
			if t.NextRun.IsZero() && t.Status == StatusActive {
				t.Status = endStatus(r)
			}
		case r.Status == RunDead:
			t.Status, t.NextRun = StatusDead, time.Time{}
		default:
			t.NextRun = r.FinishedAt.Add(backoff(t.Retry.Backoff, r.Attempt))
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.ended(ctx, t, r, res, nil)
	if next, gerr := e.store.Get(wctx, t.TenantID, t.ID); gerr == nil && (r.Status == RunSucceeded || r.Status == RunRefused) {
		e.scheduled(next)
	}
	return nil
}

// backoff is the wait after a failed attempt.
func backoff(base time.Duration, attempt int) time.Duration {
	return Retry{Backoff: base}.Delay(attempt)
}

// attempt runs one attempt of run r of t through t's executor, telling
// the Observer it started, and returns r with its outcome (finish).
func (e *Engine) attempt(ctx context.Context, t *Task, r Run, ev *Event, prev *Previous) (Run, ExecResult, error) {
	e.observe(LifecycleStarted, t, r)
	var res ExecResult
	var xerr error
	if ex, ok := e.executors[t.ExecutorName()]; ok {
		res, xerr = e.execute(ctx, ex, t, r, ev, prev)
	} else {
		xerr = fmt.Errorf("%w: no executor %q", ErrInvalid, t.ExecutorName())
	}
	return e.finish(r, res, xerr), res, xerr
}

// execute runs one attempt with the task's timeout, recovering a panic.
func (e *Engine) execute(ctx context.Context, ex Executor, t *Task, r Run, ev *Event, prev *Previous) (res ExecResult, err error) {
	timeout := e.runTimeout
	if t.Budget.MaxWall > 0 {
		timeout = t.Budget.MaxWall + WallGrace
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if e.tracer != nil {
		var span trace.Span
		ctx, span = e.startRunSpan(ctx, t, r, ev)
		defer func() { endRunSpan(span, err) }()
	}
	defer func() {
		if p := recover(); p != nil {
			res, err = ExecResult{}, fmt.Errorf("trigger: executor %q panicked: %v", t.ExecutorName(), p)
		}
	}()
	return ex.Execute(ctx, ExecRun{Task: t.Clone(), RunID: r.ID, DueAt: r.DueAt, Attempt: r.Attempt, Event: ev, Previous: prev})
}

// finish fills in the outcome of an attempt: succeeded or failed.
func (e *Engine) finish(r Run, res ExecResult, err error) Run {
	r.FinishedAt = e.clock.Now()
	if r.FinishedAt.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt
	}
	if res.Usage.Check() == nil {
		r.Consumed = res.Usage
	}
	r.AgentRunID = clip(res.AgentRunID)
	if err != nil {
		r.Status, r.Error = RunFailed, clip(err.Error())
		if r.Error == "" {
			r.Error = "failed"
		}
		return r
	}
	r.Status, r.Result = RunSucceeded, clip(res.Result)
	if len(res.Approvals) > 0 {
		r.Status = RunWaiting
		r.Approvals = make([]Approval, len(res.Approvals))
		for i, a := range res.Approvals {
			a.Outcome = ""
			a.ID, a.Summary = clip(a.ID), clip(a.Summary)
			r.Approvals[i] = a
		}
	}
	return r
}

// clip makes s valid UTF-8 text without NUL of at most MaxTextLen bytes.
func clip(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= MaxTextLen {
		return s
	}
	s = s[:MaxTextLen]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
