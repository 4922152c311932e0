package trigger_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// The approval is listed (ListPendingApprovals) as soon as the assistant
// parks it, before the executor returns and the engine records the run
// as waiting. A user who answers at once is ignored (the run is still
// RunRunning), so the run waits for a decision that already came: the
// sweeper then marks it EXPIRED ("nothing ran") although the email was
// sent, and the one-time task goes back to ACTIVE.
func TestApprovalDecidedBeforeRunRecordedWaiting(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		id := "ap-" + run.RunID
		// The user approves from the pending list while the run is
		// still finishing; the assistant's Decided hook reports it.
		_ = h.e.ApprovalSettled(ctx, trigger.Settled{TenantID: run.Task.TenantID, TaskID: run.Task.ID,
			ApprovalID: id, Outcome: trigger.OutcomeApproved, Result: "Sent to team@example.com."})
		return trigger.ExecResult{
			Result:    "I drafted the email; shall I send it?",
			Approvals: []trigger.Approval{{ID: id, Summary: "Send an email", ExpiresAt: h.clk.Now().Add(time.Hour)}},
		}, nil
	})
	h.create(t, scheduleTask("t1", "once", trigger.Schedule{At: at(1, 9, 0)}))
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "the run to end", func() bool {
		rs := h.runs(t, "t1", "once")
		return len(rs) == 1 && rs[0].Status != trigger.RunRunning
	})
	// Let the sweeper run past the approval's expiry.
	for range 20 {
		h.clk.Advance(10 * time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	r := h.runs(t, "t1", "once")[0]
	task := h.get(t, "t1", "once")
	if r.Status != trigger.RunSucceeded {
		t.Fatalf("approved (and sent) instantly, the run is %s (%q), task %s; approvals %+v",
			r.Status, r.Error, task.Status, r.Approvals)
	}
}

// RunNow of a task whose run waits for an approval: the run is
// RunWaiting, but RunNow neither tells the channel (no approval notice),
// nor watches it for the sweeper (it never expires), and the Observer
// hears LifecycleFailed.
func TestRunNowWaitingRun(t *testing.T) {
	chat := &notes{}
	var mu sync.Mutex
	var steps []trigger.LifecycleKind
	h := newHarness(t, trigger.Config{
		Notifiers: map[string]trigger.Notifier{"chat": chat},
		Observer: func(l trigger.Lifecycle) {
			mu.Lock()
			steps = append(steps, l.Kind)
			mu.Unlock()
		},
	})
	h.exec.setFn(waitingExec(h))
	task := scheduleTask("t1", "mail", trigger.Schedule{Cron: "0 0 1 1 *"})
	task.Output = trigger.Output{Channel: "chat"}
	h.create(t, task)
	h.start()
	r, err := h.e.RunNow(context.Background(), "t1", "mail")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != trigger.RunWaiting {
		t.Fatalf("run %+v", r)
	}
	for range 20 {
		h.clk.Advance(10 * time.Minute)
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	got := append([]trigger.LifecycleKind(nil), steps...)
	mu.Unlock()
	var problems []string
	if len(chat.all()) == 0 {
		problems = append(problems, "no approval notice reached the channel")
	}
	for _, s := range got {
		if s == trigger.LifecycleFailed {
			problems = append(problems, "the observer heard failed")
		}
	}
	if rs := h.runs(t, "t1", "mail"); rs[0].Status == trigger.RunWaiting {
		problems = append(problems, "3h20m on, the 1h approval never expired (not watched)")
	}
	if len(problems) > 0 {
		t.Fatalf("RunNow's waiting run: %v (observer %v)", problems, got)
	}
}

// blockingNotes blocks result notices until release is closed.
type blockingNotes struct{ release chan struct{} }

func (b *blockingNotes) Notify(ctx context.Context, n trigger.Notification) error {
	if n.Kind != trigger.NotifyResult {
		return nil
	}
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ApprovalSettled delivers the result (notifier retries, 30 s deadline
// each) while holding the engine-wide settleMu: a slow channel of tenant
// t1 holds up every other tenant's approvals (and the user's reply that
// carries them, as Hooks.Decided runs inside the assistant's run).
func TestSettleHoldsGlobalLockDuringDelivery(t *testing.T) {
	slow := &blockingNotes{release: make(chan struct{})}
	defer close(slow.release)
	h := newHarness(t, trigger.Config{Notifiers: map[string]trigger.Notifier{"slow": slow}})
	h.exec.setFn(waitingExec(h))
	a := scheduleTask("t1", "a", trigger.Schedule{At: at(1, 9, 0)})
	a.Output = trigger.Output{Channel: "slow"}
	h.create(t, a)
	h.create(t, scheduleTask("t2", "b", trigger.Schedule{At: at(1, 9, 0)}))
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "both waiting", func() bool {
		ra, rb := h.runs(t, "t1", "a"), h.runs(t, "t2", "b")
		return len(ra) == 1 && len(rb) == 1 && ra[0].Status == trigger.RunWaiting && rb[0].Status == trigger.RunWaiting
	})
	ra, rb := h.runs(t, "t1", "a")[0], h.runs(t, "t2", "b")[0]
	go func() {
		_ = h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t1", TaskID: "a",
			ApprovalID: ra.Approvals[0].ID, Outcome: trigger.OutcomeApproved, Result: "sent"})
	}()
	time.Sleep(100 * time.Millisecond) // t1's settle is in its notifier
	done := make(chan struct{})
	go func() {
		_ = h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t2", TaskID: "b",
			ApprovalID: rb.Approvals[0].ID, Outcome: trigger.OutcomeApproved, Result: "sent"})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("tenant t2's approval is blocked for >2s behind tenant t1's slow notifier (settleMu held through deliver)")
	}
}

// The chained run that follows an approved run is started with the ctx
// given to ApprovalSettled, i.e. the ctx of the assistant's run that
// carried the user's decision (an HTTP request). When that request ends,
// the chained run is interrupted and parked until the engine's next Run.
func TestChainAfterApprovalUsesCallersCtx(t *testing.T) {
	release := make(chan struct{})
	var bCalls atomic.Int32
	h := newHarness(t, trigger.Config{})
	wait := waitingExec(h)
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if run.Task.ID == "b" {
			bCalls.Add(1)
			select {
			case <-release:
				return trigger.ExecResult{Result: "b done"}, nil
			case <-ctx.Done():
				return trigger.ExecResult{}, ctx.Err()
			}
		}
		return wait(ctx, run)
	})
	a := scheduleTask("t1", "a", trigger.Schedule{At: at(1, 9, 0)})
	a.Route = trigger.Route{Kind: trigger.RouteChain, Next: "b"}
	h.create(t, scheduleTask("t1", "b", trigger.Schedule{Cron: "0 0 1 1 *"}))
	h.create(t, a)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "a waiting", func() bool {
		rs := h.runs(t, "t1", "a")
		return len(rs) == 1 && rs[0].Status == trigger.RunWaiting
	})
	ra := h.runs(t, "t1", "a")[0]
	reqCtx, endRequest := context.WithCancel(context.Background())
	if err := h.e.ApprovalSettled(reqCtx, trigger.Settled{TenantID: "t1", TaskID: "a",
		ApprovalID: ra.Approvals[0].ID, Outcome: trigger.OutcomeApproved, Result: "sent"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b started", func() bool { return bCalls.Load() == 1 })
	endRequest() // the user's request is answered
	time.Sleep(50 * time.Millisecond)
	close(release)
	time.Sleep(100 * time.Millisecond)
	rs := h.runs(t, "t1", "b")
	if len(rs) != 1 || rs[0].Status != trigger.RunSucceeded {
		t.Fatalf("the chained run after the approval: %+v (the engine is still running)", rs)
	}
}

// An event run the engine's stop interrupted runs again at the next Run
// even though the user paused the task in between: resumeInterrupted
// uses the task as it was and never reads it again.
func TestResumeInterruptedIgnoresPause(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			return trigger.ExecResult{}, ctx.Err()
		}
		return trigger.ExecResult{Result: "ran"}, nil
	})
	h.create(t, eventTask("t1", "ev", trigger.Trigger{Source: "gmail"}))
	h.start()
	if err := h.e.Publish(context.Background(), trigger.Event{ID: "m1", TenantID: "t1", Source: "gmail", Type: "x"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run started", func() bool { return calls.Load() == 1 })
	if err := h.stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Pause(context.Background(), "t1", "ev"); err != nil {
		t.Fatal(err)
	}
	h.start()
	time.Sleep(200 * time.Millisecond)
	if n := calls.Load(); n != 1 {
		t.Fatalf("the PAUSED task ran again at the next Run (%d executions); status %s, runs %+v",
			n, h.get(t, "t1", "ev").Status, h.runs(t, "t1", "ev"))
	}
}
