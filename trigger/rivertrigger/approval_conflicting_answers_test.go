package rivertrigger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// The user approves on one replica while cancelling on another (two
// tabs, two clicks): each run ends with exactly one of the two answers —
// its recorded outcome, its result and the one notice all agree — never
// an approval's outcome with the cancellation's text, nor both told.
func TestApproveAndCancelOnTwoReplicasSettleOneAnswer(t *testing.T) {
	const n = 12
	rs := newReplicas(t, time.Hour)
	a, _ := rs.start(t)
	ctx := context.Background()
	due := time.Now().Add(3 * time.Second) // creating 12 tasks on a loaded machine may take a second
	for i := range n {
		if err := a.CreateTask(ctx, mailTask(fmt.Sprintf("mail%02d", i), due)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "every run waiting", func() (bool, error) {
		list, err := a.List(ctx, "acme", trigger.StatusPendingApproval)
		return len(list) == n, err
	})
	b, _ := rs.start(t)
	answers := map[string]string{trigger.OutcomeApproved: "Sent to team@example.com.", trigger.OutcomeCancelled: "Cancelled; nothing was sent."}
	var wg sync.WaitGroup
	for i := range n {
		id := fmt.Sprintf("mail%02d", i)
		for e, outcome := range map[*trigger.Engine]string{a: trigger.OutcomeApproved, b: trigger.OutcomeCancelled} {
			wg.Go(func() {
				if err := e.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: id, ApprovalID: "ap-" + id,
					Outcome: outcome, Result: answers[outcome]}); err != nil {
					t.Errorf("settling %s: %v", id, err)
				}
			})
		}
	}
	wg.Wait()
	// The answer's notice, queued with the settlement's record, goes out
	// through River.
	waitFor(t, 20*time.Second, "every answer told", func() (bool, error) {
		for i := range n {
			if rs.count(fmt.Sprintf("mail%02d", i), trigger.NotifyResult) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(time.Second) // a second notice would be delivered by now
	for i := range n {
		id := fmt.Sprintf("mail%02d", i)
		runs, err := a.Runs(ctx, "acme", id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || len(runs[0].Approvals) != 1 {
			t.Fatalf("%s: runs %+v", id, runs)
		}
		r := runs[0]
		if want := answers[r.Approvals[0].Outcome]; want == "" || r.Result != want {
			t.Errorf("%s: outcome %q with result %q", id, r.Approvals[0].Outcome, r.Result)
		}
		if got := rs.count(id, trigger.NotifyResult); got != 1 {
			t.Errorf("%s: the answer was told %d times, want once", id, got)
		}
	}
}

// A settlement heard for a task with no run waiting (a stale click, a
// forged or guessed approval id) must not be kept to approve a later run
// that happens to raise an approval of that id: the user never saw it.
func TestSettlementKeptForAnApprovalNotYetRaisedDoesNotApproveALaterRun(t *testing.T) {
	rs := newReplicas(t, time.Hour)
	a, _ := rs.start(t)
	ctx := context.Background()
	task := mailTask("mail", time.Now().Add(time.Hour))
	if err := a.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	// An hour before the run, someone settles the approval it will raise.
	if err := a.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: "mail", ApprovalID: "ap-mail",
		Outcome: trigger.OutcomeApproved, Result: "Sent."}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RunNow(ctx, "acme", "mail"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the run recorded", func() (bool, error) {
		runs, err := a.Runs(ctx, "acme", "mail", 0)
		return err == nil && len(runs) == 1 && runs[0].Status != trigger.RunRunning, err
	})
	time.Sleep(time.Second)
	runs, err := a.Runs(ctx, "acme", "mail", 0)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Status != trigger.RunWaiting {
		t.Fatalf("a run approved before it asked: %+v", runs[0])
	}
}
