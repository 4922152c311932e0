package trigger_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/trigger"
)

// RunNotice gives the approval request of a waiting run and the news of
// its expiry, each with a key of its own, so that a NotifyDispatcher
// queues them with the record as it does a run's result.
func TestRunNoticeOfWaitingAndExpiredRuns(t *testing.T) {
	task := &trigger.Task{ID: "mail", TenantID: "t1", Name: "Mail", Output: trigger.Output{Channel: "chat", Target: "u1"}}
	waiting := trigger.Run{ID: "mail@1", TaskID: "mail", TenantID: "t1", Status: trigger.RunWaiting,
		Approvals: []trigger.Approval{{ID: "a1", Summary: "Send it\nand forget the rest"}, {ID: "a2", Summary: "Pay"}}}
	n, ok := trigger.RunNotice(task, waiting)
	if !ok || n.Kind != trigger.NotifyApproval || n.IdempotencyKey != trigger.NotificationKey("mail@1", trigger.NotifyApproval) ||
		n.Metadata["approval_ids"] != "a1,a2" || n.Target != "u1" || n.RunID != "mail@1" {
		t.Fatalf("request: %+v, %v", n, ok)
	}
	if want := "\"Mail\" needs your confirmation before it goes on:\n- Send it and forget the rest\n- Pay"; n.Text != want {
		t.Fatalf("request text %q, want %q (a summary adds no line of its own)", n.Text, want)
	}
	expired := waiting
	expired.Status = trigger.RunExpired
	n, ok = trigger.RunNotice(task, expired)
	if !ok || n.Kind != trigger.NotifyExpired || n.IdempotencyKey != trigger.NotificationKey("mail@1", trigger.NotifyExpired) {
		t.Fatalf("expiry: %+v, %v", n, ok)
	}
	expired.ResultShown = true // the reply to the user's own message told them
	if n, ok := trigger.RunNotice(task, expired); ok {
		t.Fatalf("expiry the user was shown: %+v", n)
	}
	silent := *task
	silent.Output = trigger.Output{}
	if n, ok := trigger.RunNotice(&silent, waiting); ok {
		t.Fatalf("a task with no channel: %+v", n)
	}
}

// An approval request delivered after its run stopped waiting (the user
// answered on another replica, or it expired, while the request was
// queued) is dropped, not shown; one whose run waits is delivered.
func TestApprovalRequestDroppedOnceItsRunNoLongerWaits(t *testing.T) {
	chat := &notes{}
	h := newHarness(t, trigger.Config{Notifiers: map[string]trigger.Notifier{"chat": chat}})
	h.exec.setFn(waitingExec(h))
	task := scheduleTask("t1", "mail", trigger.Schedule{At: at(1, 9, 0)})
	task.Output = trigger.Output{Channel: "chat"}
	h.create(t, task)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "the run waiting and asked", func() bool {
		runs := h.runs(t, "t1", "mail")
		return len(runs) == 1 && runs[0].Status == trigger.RunWaiting && len(chat.all()) == 1
	})
	r := h.runs(t, "t1", "mail")[0]
	req, ok := trigger.RunNotice(h.get(t, "t1", "mail"), r)
	if !ok {
		t.Fatal("no request for a waiting run")
	}
	ctx := context.Background()
	if err := h.e.HandleNotification(ctx, req, false); err != nil || len(chat.all()) != 2 {
		t.Fatalf("a request of a waiting run: %v, %d notices; want it delivered", err, len(chat.all()))
	}
	if err := h.e.ApprovalSettled(ctx, trigger.Settled{TenantID: "t1", TaskID: "mail", ApprovalID: r.Approvals[0].ID,
		Outcome: trigger.OutcomeApproved, Result: "Sent."}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the answer told", func() bool { return len(chat.all()) == 3 })
	if err := h.e.HandleNotification(ctx, req, true); err != nil {
		t.Fatalf("a stale request: %v", err)
	}
	if got := chat.all(); len(got) != 3 {
		t.Fatalf("a request of a settled run was delivered: %+v", got[3:])
	}
	if r := h.runs(t, "t1", "mail")[0]; r.RouteError != "" || r.Status != trigger.RunSucceeded {
		t.Fatalf("the settled run after a stale request: %+v", r)
	}
}
