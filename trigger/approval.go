package trigger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/valetkit/valet/internal/textsafe"
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
	// ResultShown says the user has already been shown Result where they
	// decided (the reply to their chat message): the run records it
	// (Run.ResultShown) and its route does not notify it again, so the
	// answer arrives once. False (a decision from a UI, an expiry): the
	// task's notifier tells them.
	ResultShown bool
}

type waitKey struct{ tenant, task, run string }

// maxEarly is how many settled approvals an engine keeps for runs it has
// not yet recorded as waiting (the user answered at once).
const maxEarly = 1024

// ApprovalSettled records how an approval of a waiting run ended (a hook
// of the assistant calls it: trigger/agentexec.Approvals). Once every
// approval of the run has an outcome the run ends: expired when they all
// expired (nothing ran), succeeded otherwise, with s.Result as its result
// delivered along the task's route (when no settlement brought a result,
// the reply to the decision having failed, a list of how each approval
// ended: never the text the run waited with). A task PENDING_APPROVAL becomes
// COMPLETED, or ACTIVE again when its run expired. An approval settled
// before its run is recorded as waiting (the user answered at once) is
// kept, and applied when the run is. An approval of a task the tenant
// does not have, or settled already, is ignored. The outcome is recorded
// even when ctx ends first: the decision was taken.
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
	// The decision is taken (the action ran or was dropped): it is
	// recorded even when the caller's ctx ends meanwhile (a user who left
	// a streamed reply), within recordTimeout.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	end, err := e.settle(wctx, s)
	if err != nil || end == nil {
		return err
	}
	// Deliver outside the lock, on the engine's context: the caller's
	// (a user's request) may end first.
	e.endedAs(e.background(ctx), end.t, end.r, ExecResult{}, nil, end.queued)
	return nil
}

// settledEnd is a run a settlement ended: t is its task after it, r its
// record, and queued says the store queued its notice with the record
// (a RunSwapper that is a NotifyDispatcher).
type settledEnd struct {
	t      *Task
	r      Run
	queued bool
}

// settle records s under settleMu and returns the run it ended, nil
// when it ended none. A run another replica wrote meanwhile (ErrConflict
// of a RunSwapper) is read again: s is applied to what it wrote, or found
// settled already.
func (e *Engine) settle(ctx context.Context, s Settled) (*settledEnd, error) {
	e.settleMu.Lock()
	defer e.settleMu.Unlock()
	for i := 0; ; i++ {
		end, err := e.settleOnce(ctx, s)
		if !errors.Is(err, ErrConflict) || i >= conflictRetries {
			return end, err
		}
	}
}

func (e *Engine) settleOnce(ctx context.Context, s Settled) (*settledEnd, error) {
	t, err := e.store.Get(ctx, s.TenantID, s.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	runs, err := e.store.Runs(ctx, s.TenantID, s.TaskID, 0)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		for i := range r.Approvals {
			if r.Approvals[i].ID != s.ApprovalID {
				continue
			}
			if r.Status != RunWaiting || r.Approvals[i].Outcome != "" {
				return nil, nil // settled already
			}
			first := true // no approval of r was settled before: r.Result is still what it asked with
			for _, a := range r.Approvals {
				first = first && a.Outcome == ""
			}
			old := r
			old.Approvals = slices.Clone(r.Approvals)
			r.Approvals[i].Outcome = s.Outcome
			switch {
			case s.Result != "":
				r.Result, r.ResultShown = clip(s.Result), s.ResultShown
			case first:
				// Decided with no answer (the reply to the user failed):
				// the question the run waited with is no outcome.
				r.Result = ""
			}
			return e.settleRun(ctx, t, old, r)
		}
	}
	return e.keepEarly(ctx, s)
}

// settleRun records the outcome just set on the waiting run r, which was
// old, and ends r when all its approvals have one. On a RunSwapper the
// record is a compare and set: when another replica wrote the run first,
// it writes nothing and returns ErrConflict, so the run ends, and its
// outcome is delivered, once. A RunSwapper that is a NotifyDispatcher
// queues the notice of the run it ends with its record.
func (e *Engine) settleRun(ctx context.Context, t *Task, old, r Run) (*settledEnd, error) {
	sw, swaps := e.store.(RunSwapper)
	write := func(r Run) error {
		if swaps {
			return sw.SwapRun(ctx, old, r) // ErrConflict: settle reads it again
		}
		return e.store.UpdateRun(ctx, r)
	}
	expired := true
	for _, a := range r.Approvals {
		if a.Outcome == "" {
			return nil, write(r)
		}
		expired = expired && a.Outcome == OutcomeExpired
	}
	e.unwatch(waitKey{t.TenantID, t.ID, r.ID})
	r.FinishedAt = e.clock.Now()
	if r.FinishedAt.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt
	}
	r.Status = RunSucceeded
	if expired {
		r.Status, r.Error = RunExpired, "its approvals expired unanswered; nothing ran"
	} else if r.Result == "" {
		r.Result = settledText(t, r)
	}
	moved := func(t *Task) error {
		if t.Status == StatusPendingApproval {
			t.Status = StatusCompleted
			if expired {
				t.Status = StatusActive
			}
		}
		return nil
	}
	queued := swaps && e.notifiesQueued(ctx)
	if st, ok := e.store.(RunSettler); ok && t.Status == StatusPendingApproval {
		// The run's end and the task's move in one transaction: a
		// conflict on either (another replica settled it, the task was
		// edited) writes nothing, and settle reads both again.
		next := t.Clone()
		_ = moved(next)
		if err := st.SettleRun(ctx, old, r, next); err != nil {
			return nil, err
		}
		return &settledEnd{t: next, r: r, queued: queued}, nil
	}
	if err := write(r); err != nil {
		return nil, err
	}
	t, err := e.mutate(ctx, t.TenantID, t.ID, moved)
	if err != nil {
		return nil, err
	}
	return &settledEnd{t: t, r: r, queued: queued}, nil
}

// keepEarly keeps s for a run not yet recorded as waiting: on a
// SettlementKeeper in the store, for whichever replica records the run,
// else in this engine's memory. Kept in the store, s is then looked for
// again: a run recorded waiting meanwhile, whose recorder took nothing,
// is settled here (the settlement taken back first, so once).
//
// s is kept only while a run of the task is in flight (RunRunning: the
// run that may be about to record the approval) or a run holds its
// approval: one heard for a task with no run in flight (a stale click, a
// forged or guessed approval ID) is dropped, so it cannot approve a later
// run whose approval the user never saw.
func (e *Engine) keepEarly(ctx context.Context, s Settled) (*settledEnd, error) {
	runs, err := e.store.Runs(ctx, s.TenantID, s.TaskID, 0)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(runs, func(r Run) bool {
		return r.Status == RunRunning || slices.ContainsFunc(r.Approvals, func(a Approval) bool { return a.ID == s.ApprovalID })
	}) {
		e.log.Warn("trigger: an approval settled for a task with no run in flight or waiting for it is dropped",
			"tenant", s.TenantID, "task", s.TaskID, "approval", s.ApprovalID, "outcome", s.Outcome)
		return nil, nil
	}
	k, ok := e.store.(SettlementKeeper)
	if !ok {
		e.keepEarlyHere(s)
		return nil, nil
	}
	if err := k.KeepSettled(ctx, s); err != nil {
		return nil, err
	}
	runs, err = e.store.Runs(ctx, s.TenantID, s.TaskID, 0)
	if err != nil {
		return nil, err
	}
	for _, r := range runs {
		for _, a := range r.Approvals {
			if a.ID != s.ApprovalID || r.Status != RunWaiting || a.Outcome != "" {
				continue
			}
			taken, err := k.TakeSettled(ctx, s.TenantID, s.TaskID, []string{s.ApprovalID})
			if err != nil || len(taken) == 0 {
				return nil, err // the run's recorder took it
			}
			return e.settleOnce(ctx, taken[0])
		}
	}
	return nil, nil
}

// keepEarlyHere keeps s in the engine's memory.
func (e *Engine) keepEarlyHere(s Settled) {
	k := s.TenantID + "\x00" + s.TaskID + "\x00" + s.ApprovalID
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.early[k]; ok {
		return
	}
	if len(e.earlyRing) == maxEarly {
		delete(e.early, e.earlyRing[0])
		e.earlyRing = e.earlyRing[1:]
	}
	e.earlyRing = append(e.earlyRing, k)
	e.early[k] = s
}

// takeEarly removes and returns the settlements kept for the approvals
// of run r of t: from the store when it keeps them, and from memory.
func (e *Engine) takeEarly(ctx context.Context, t *Task, r Run) []Settled {
	var found []Settled
	ids := make([]string, 0, len(r.Approvals))
	e.mu.Lock()
	for _, a := range r.Approvals {
		ids = append(ids, a.ID)
		k := t.TenantID + "\x00" + t.ID + "\x00" + a.ID
		if s, ok := e.early[k]; ok {
			found = append(found, s)
			delete(e.early, k)
		}
	}
	e.mu.Unlock()
	if k, ok := e.store.(SettlementKeeper); ok {
		kept, err := k.TakeSettled(ctx, t.TenantID, t.ID, ids)
		if err != nil {
			e.log.Error("trigger: taking the settlements kept for a waiting run", "tenant", t.TenantID, "task", t.ID,
				"run", r.ID, "err", err)
		}
		found = append(found, kept...)
	}
	return found
}

// applyEarly settles the approvals of the waiting run r that were
// settled before it was recorded, and reports whether that ended r.
func (e *Engine) applyEarly(ctx context.Context, t *Task, r Run) bool {
	found := e.takeEarly(ctx, t, r)
	ended := false
	for _, s := range found {
		end, err := e.settle(ctx, s)
		if err != nil {
			e.log.Error("trigger: recording an approval's outcome", "tenant", s.TenantID, "task", s.TaskID,
				"approval", s.ApprovalID, "err", err)
			continue
		}
		if end != nil {
			e.endedAs(ctx, end.t, end.r, ExecResult{}, nil, end.queued)
			ended = true
		}
	}
	return ended
}

// background is the engine's context while Run runs, for work that must
// not end with a caller's request; otherwise ctx without its
// cancellation.
func (e *Engine) background(ctx context.Context) context.Context {
	if p := e.runCtx.Load(); p != nil {
		return *p
	}
	return context.WithoutCancel(ctx)
}

// watch notes a waiting run for the sweeper, due at its approvals'
// earliest expiry.
func (e *Engine) watch(t *Task, r Run) {
	if e.expiryDispatched() {
		return // the store queued the expiry with the run's record
	}
	var first time.Time
	for _, a := range r.Approvals {
		if a.Outcome == "" && !a.ExpiresAt.IsZero() && (first.IsZero() || a.ExpiresAt.Before(first)) {
			first = a.ExpiresAt
		}
	}
	k := waitKey{t.TenantID, t.ID, r.ID}
	if first.IsZero() {
		e.unwatch(k) // nothing left to expire
		return
	}
	e.mu.Lock()
	e.waiting[k] = first
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
		e.setSweep(e.clock.Now().Add(ApprovalSweep))
		tm := e.clock.NewTimer(ApprovalSweep)
		select {
		case <-ctx.Done():
			tm.Stop()
			e.setSweep(time.Time{})
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
		e.setSweep(time.Time{}) // this pass is done
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

// settledText is the result of run r of t whose approvals were decided
// without an answer to tell the user (the reply to their decision
// failed): how each ended.
func settledText(t *Task, r Run) string {
	lines := make([]string, 0, len(r.Approvals))
	for _, a := range r.Approvals {
		what := "approved"
		switch a.Outcome {
		case OutcomeEdited:
			what = "approved with your changes"
		case OutcomeCancelled:
			what = "cancelled"
		case OutcomeExpired:
			what = "not confirmed in time; not done"
		}
		lines = append(lines, "- "+textsafe.Line(a.Summary)+": "+what)
	}
	return clip(fmt.Sprintf("%q went on with what you decided:\n%s", t.Name, strings.Join(lines, "\n")))
}

// expiryDispatched reports whether the store times approvals' expiry
// itself (ExpiryDispatcher), in place of the sweeper.
func (e *Engine) expiryDispatched() bool {
	d, ok := e.store.(ExpiryDispatcher)
	return ok && d.DispatchesExpiry()
}

// HandleExpiry implements [ExpiryHandler]: it settles, as expired, the
// approvals of the tenant's waiting run runID of task taskID that expire
// by at, or by the engine's clock when it is later (a database's clock
// that timed the call may be ahead of this process's), ending the run
// when none is left (the task's channel told, NotifyExpired, and the
// Observer, LifecycleExpired), on whichever replica an ExpiryDispatcher
// calls it. A run that is not waiting, and an approval settled already,
// are left as they are.
func (e *Engine) HandleExpiry(ctx context.Context, tenantID, taskID, runID string, at time.Time) error {
	if err := checkTask(tenantID, taskID); err != nil {
		return err
	}
	if now := e.clock.Now(); now.After(at) {
		at = now
	}
	return e.expireRun(ctx, waitKey{tenantID, taskID, runID}, at)
}
