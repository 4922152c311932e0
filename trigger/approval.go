package trigger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ApprovalSweep is how often Run looks for approvals of waiting runs
// that expired.
const ApprovalSweep = time.Minute

// The outcomes of an Approval.
const (
	OutcomeApproved  = "approve"
	OutcomeEdited    = "edit"
	OutcomeCancelled = "cancel"
	OutcomeExpired   = "expired"
)

// Approval is an action of a run that waits for the user's confirmation
// (an email to send, a payment).
type Approval struct {
	// ID is the approval request's ID, as the assistant knows it.
	ID string `json:"id"`
	// Summary is the action in one line ("Send an email to …").
	Summary string `json:"summary,omitempty"`
	// ExpiresAt is when the request lapses unanswered.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Outcome is empty while it waits, then one of the Outcome
	// constants.
	Outcome string `json:"outcome,omitempty"`
}

// Settled is how an approval of a triggered run ended, as the engine is
// told by [Engine.ApprovalSettled].
type Settled struct {
	TenantID, TaskID, ApprovalID string
	// Outcome is one of the Outcome constants.
	Outcome string
	// Result is what the user was told once it was decided (the
	// assistant's answer after the action ran); it becomes the run's
	// result.
	Result string
}

type waitKey struct{ tenant, task, run string }

// ApprovalSettled records how an approval of a waiting run ended (a hook
// of the assistant calls it: trigger/agentexec.Approvals). Once every
// approval of the run has an outcome the run ends: expired when they all
// expired (nothing ran), succeeded otherwise, with s.Result as its result
// delivered along the task's route. A task PENDING_APPROVAL becomes
// COMPLETED, or ACTIVE again when its run expired. An approval the engine
// does not know of (another task's, one settled already) is ignored.
func (e *Engine) ApprovalSettled(ctx context.Context, s Settled) (err error) {
	defer func() {
		if err != nil {
			e.log.Error("trigger: recording an approval's outcome", "tenant", s.TenantID, "task", s.TaskID,
				"approval", s.ApprovalID, "err", err)
		}
	}()
	switch s.Outcome {
	case OutcomeApproved, OutcomeEdited, OutcomeCancelled, OutcomeExpired:
	default:
		return fmt.Errorf("%w: approval outcome %q", ErrInvalid, s.Outcome)
	}
	e.settleMu.Lock()
	defer e.settleMu.Unlock()
	t, err := e.store.Get(ctx, s.TenantID, s.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	runs, err := e.store.Runs(ctx, s.TenantID, s.TaskID, 0)
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.Status != RunWaiting {
			continue
		}
		for i := range r.Approvals {
			if r.Approvals[i].ID == s.ApprovalID && r.Approvals[i].Outcome == "" {
				r.Approvals[i].Outcome = s.Outcome
				return e.settleRun(ctx, t, r, s.Result)
			}
		}
	}
	return nil
}

// settleRun ends the waiting run r once all its approvals have an
// outcome; until then it records the one that came.
func (e *Engine) settleRun(ctx context.Context, t *Task, r Run, result string) error {
	expired := true
	for _, a := range r.Approvals {
		if a.Outcome == "" {
			return e.store.UpdateRun(ctx, r)
		}
		expired = expired && a.Outcome == OutcomeExpired
	}
	e.unwatch(waitKey{t.TenantID, t.ID, r.ID})
	r.FinishedAt = e.clock.Now()
	if r.FinishedAt.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt
	}
	if expired {
		r.Status, r.Error = RunExpired, "its approvals expired unanswered; nothing ran"
	} else {
		r.Status = RunSucceeded
		if result != "" {
			r.Result = clip(result)
		}
	}
	if err := e.store.UpdateRun(ctx, r); err != nil {
		return err
	}
	t, err := e.mutate(ctx, t.TenantID, t.ID, func(t *Task) error {
		if t.Status == StatusPendingApproval {
			t.Status = StatusCompleted
			if expired {
				t.Status = StatusActive
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.ended(ctx, t, r, ExecResult{}, nil)
	return nil
}

// watch notes a waiting run for the sweeper, due at its approvals'
// earliest expiry.
func (e *Engine) watch(t *Task, r Run) {
	var first time.Time
	for _, a := range r.Approvals {
		if a.Outcome == "" && !a.ExpiresAt.IsZero() && (first.IsZero() || a.ExpiresAt.Before(first)) {
			first = a.ExpiresAt
		}
	}
	if first.IsZero() {
		return
	}
	e.mu.Lock()
	e.waiting[waitKey{t.TenantID, t.ID, r.ID}] = first
	e.mu.Unlock()
	select {
	case e.watched <- struct{}{}:
	default:
	}
}

func (e *Engine) unwatch(k waitKey) {
	e.mu.Lock()
	delete(e.waiting, k)
	e.mu.Unlock()
}

// sweep settles, every ApprovalSweep until ctx ends, the approvals of
// waiting runs that expired: the assistant's pool drops an expired
// approval only when it is next touched. It knows the runs that went
// waiting in this process; an approval of an earlier process is settled
// when the user answers it (the assistant finds it expired).
func (e *Engine) sweep(ctx context.Context) {
	for {
		e.mu.Lock()
		idle := len(e.waiting) == 0
		e.mu.Unlock()
		if idle { // no timer while nothing waits
			select {
			case <-ctx.Done():
				return
			case <-e.watched:
			}
			continue
		}
		tm := e.clock.NewTimer(ApprovalSweep)
		select {
		case <-ctx.Done():
			tm.Stop()
			return
		case <-tm.C():
		}
		now := e.clock.Now()
		var due []waitKey
		e.mu.Lock()
		for k, at := range e.waiting {
			if !at.After(now) {
				due = append(due, k)
			}
		}
		e.mu.Unlock()
		for _, k := range due {
			if err := e.expireRun(ctx, k, now); err != nil && ctx.Err() == nil {
				e.log.Error("trigger: expiring a waiting run", "tenant", k.tenant, "task", k.task, "run", k.run, "err", err)
			}
		}
	}
}

// expireRun settles the approvals of run k that expired by now.
func (e *Engine) expireRun(ctx context.Context, k waitKey, now time.Time) error {
	runs, err := e.store.Runs(ctx, k.tenant, k.task, 0)
	if errors.Is(err, ErrNotFound) {
		e.unwatch(k)
		return nil
	}
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.ID != k.run {
			continue
		}
		if r.Status != RunWaiting {
			break
		}
		for _, a := range r.Approvals {
			if a.Outcome == "" && !a.ExpiresAt.After(now) {
				if err := e.ApprovalSettled(ctx, Settled{TenantID: k.tenant, TaskID: k.task, ApprovalID: a.ID, Outcome: OutcomeExpired}); err != nil {
					return err
				}
			}
		}
		if cur, err := e.store.Runs(ctx, k.tenant, k.task, 0); err == nil {
			for _, c := range cur {
				if c.ID == k.run && c.Status == RunWaiting {
					e.watch(&Task{TenantID: k.tenant, ID: k.task}, c) // later expiries
					return nil
				}
			}
		}
		break
	}
	e.unwatch(k)
	return nil
}
