package trigger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// waitingExec answers like an assistant that drafted an email and waits
// for the user's approval of it, expiring in an hour.
func waitingExec(h *harness) func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
	return func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{
			Result: "I drafted the email; shall I send it?",
			Approvals: []trigger.Approval{{ID: "ap-" + run.RunID, Summary: "Send an email to team@example.com",
				ExpiresAt: h.clk.Now().Add(time.Hour)}},
		}, nil
	}
}

func TestApprovalWaitThenApprove(t *testing.T) {
	chat := &notes{}
	var steps []trigger.LifecycleKind
	stepsCh := make(chan trigger.LifecycleKind, 64)
	h := newHarness(t, trigger.Config{
		Notifiers: map[string]trigger.Notifier{"chat": chat},
		Observer:  func(l trigger.Lifecycle) { stepsCh <- l.Kind },
	})
	h.exec.setFn(waitingExec(h))
	task := scheduleTask("t1", "mail", trigger.Schedule{At: at(1, 9, 0)})
	task.Output = trigger.Output{Channel: "chat"}
	h.create(t, task)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "the run waiting", func() bool {
		runs := h.runs(t, "t1", "mail")
		return len(runs) == 1 && runs[0].Status == trigger.RunWaiting &&
			h.get(t, "t1", "mail").Status == trigger.StatusPendingApproval
	})
	waitFor(t, "the approval notice", func() bool { return len(chat.all()) == 1 })
	if n := chat.all()[0]; n.Kind != trigger.NotifyApproval || n.Metadata["approval_ids"] != "ap-"+trigger.RunID("mail", at(1, 9, 0)) {
		t.Fatalf("notice %+v", n)
	}
	r := h.runs(t, "t1", "mail")[0]
	if len(r.Approvals) != 1 || r.Approvals[0].Outcome != "" || r.Approvals[0].Summary == "" {
		t.Fatalf("waiting run %+v", r)
	}
	// The user approves; the assistant sends it and says so.
	if err := h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t1", TaskID: "mail",
		ApprovalID: r.Approvals[0].ID, Outcome: trigger.OutcomeApproved, Result: "Sent to team@example.com."}); err != nil {
		t.Fatal(err)
	}
	r = h.runs(t, "t1", "mail")[0]
	if r.Status != trigger.RunSucceeded || r.Result != "Sent to team@example.com." || r.Approvals[0].Outcome != trigger.OutcomeApproved {
		t.Fatalf("decided run %+v", r)
	}
	if st := h.get(t, "t1", "mail").Status; st != trigger.StatusCompleted {
		t.Fatalf("task %s after its approval, want COMPLETED", st)
	}
	waitFor(t, "the result notice", func() bool { return len(chat.all()) == 2 })
	if n := chat.all()[1]; n.Kind != trigger.NotifyResult || n.Text != "Sent to team@example.com." {
		t.Fatalf("notice %+v", n)
	}
	// Settling again, or another task's approval, changes nothing.
	if err := h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t1", TaskID: "mail",
		ApprovalID: r.Approvals[0].ID, Outcome: trigger.OutcomeCancelled}); err != nil {
		t.Fatal(err)
	}
	if err := h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t2", TaskID: "mail",
		ApprovalID: r.Approvals[0].ID, Outcome: trigger.OutcomeCancelled}); err != nil {
		t.Fatal(err)
	}
	if r2 := h.runs(t, "t1", "mail")[0]; r2.Approvals[0].Outcome != trigger.OutcomeApproved || r2.Status != trigger.RunSucceeded {
		t.Fatalf("settled twice: %+v", r2)
	}
	if err := h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t1", TaskID: "mail",
		ApprovalID: "x", Outcome: "maybe"}); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("unknown outcome: %v", err)
	}
	waitFor(t, "the observer", func() bool { return len(stepsCh) >= 4 })
	for len(stepsCh) > 0 {
		steps = append(steps, <-stepsCh)
	}
	want := []trigger.LifecycleKind{trigger.LifecycleScheduled, trigger.LifecycleStarted, trigger.LifecycleWaiting, trigger.LifecycleCompleted}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Fatalf("observer heard %v, want %v", steps, want)
	}
}

func TestApprovalExpiresAndRecurringKeepsFiring(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(waitingExec(h))
	h.create(t, scheduleTask("t1", "hourly", trigger.Schedule{Every: time.Hour, Start: at(1, 9, 0)}))
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "run 1 waiting", func() bool {
		runs := h.runs(t, "t1", "hourly")
		return len(runs) == 1 && runs[0].Status == trigger.RunWaiting
	})
	if st := h.get(t, "t1", "hourly").Status; st != trigger.StatusActive {
		t.Fatalf("a recurring task with a waiting run is %s, want ACTIVE", st)
	}
	// An hour on, the next run fires while the first still waits; the
	// sweeper then finds the first run's approval expired.
	h.advanceTo(t, at(1, 10, 0))
	waitFor(t, "run 2", func() bool { return len(h.runs(t, "t1", "hourly")) == 2 })
	waitFor(t, "run 1 expired", func() bool {
		h.clk.Advance(10 * time.Second)
		runs := h.runs(t, "t1", "hourly")
		return len(runs) == 2 && runs[1].Status == trigger.RunExpired
	})
	r := h.runs(t, "t1", "hourly")[1]
	if r.Approvals[0].Outcome != trigger.OutcomeExpired || r.Error == "" {
		t.Fatalf("expired run %+v", r)
	}
	if st := h.get(t, "t1", "hourly").Status; st != trigger.StatusActive {
		t.Fatalf("task %s, want ACTIVE", st)
	}
}

func TestApprovalExpiredOneTimeTaskReturnsToActive(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(waitingExec(h))
	h.create(t, scheduleTask("t1", "once", trigger.Schedule{At: at(1, 9, 0)}))
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "PENDING_APPROVAL", func() bool { return h.get(t, "t1", "once").Status == trigger.StatusPendingApproval })
	waitFor(t, "expired", func() bool {
		h.clk.Advance(5 * time.Minute)
		return h.get(t, "t1", "once").Status == trigger.StatusActive
	})
	if r := h.runs(t, "t1", "once")[0]; r.Status != trigger.RunExpired {
		t.Fatalf("run %+v", r)
	}
}
