package rivertrigger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// The user's approval arrives on one replica as the approval's expiry is
// handled on another (and River's own expiry job fires): each run ends
// one way only — approved and told its result once, or expired and told
// its expiry once — never both, never a result with an expired outcome.
func TestApprovalRacingItsExpiryOnTwoReplicasEndsOneWay(t *testing.T) {
	const n = 8
	rs := newReplicas(t, 2*time.Second)
	a, _ := rs.start(t)
	b, _ := rs.start(t)
	ctx := context.Background()
	for i := range n {
		if err := a.CreateTask(ctx, mailTask(fmt.Sprintf("mail%02d", i), time.Now().Add(time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "every run waiting", func() (bool, error) {
		list, err := a.List(ctx, "acme", trigger.StatusPendingApproval)
		return len(list) == n, err
	})
	var latest time.Time
	runIDs := map[string]trigger.Run{}
	for i := range n {
		id := fmt.Sprintf("mail%02d", i)
		runs, err := a.Runs(ctx, "acme", id, 0)
		if err != nil || len(runs) != 1 {
			t.Fatalf("%s: %+v, %v", id, runs, err)
		}
		runIDs[id] = runs[0]
		if x := runs[0].Approvals[0].ExpiresAt; x.After(latest) {
			latest = x
		}
	}
	time.Sleep(time.Until(latest)) // the expiry is due now on every replica
	var wg sync.WaitGroup
	for id, r := range runIDs {
		wg.Go(func() {
			if err := a.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: id, ApprovalID: "ap-" + id,
				Outcome: trigger.OutcomeApproved, Result: "Sent."}); err != nil {
				t.Errorf("approving %s: %v", id, err)
			}
		})
		wg.Go(func() {
			if err := b.HandleExpiry(ctx, "acme", id, r.ID, r.Approvals[0].ExpiresAt); err != nil {
				t.Logf("expiry of %s: %v", id, err)
			}
		})
	}
	wg.Wait()
	time.Sleep(2 * time.Second) // River's own expiry jobs and any second notice
	for id := range runIDs {
		runs, err := a.Runs(ctx, "acme", id, 0)
		if err != nil || len(runs) != 1 {
			t.Fatalf("%s: %+v, %v", id, runs, err)
		}
		r := runs[0]
		told := rs.count(id, trigger.NotifyResult) + rs.count(id, trigger.NotifyExpired)
		switch {
		case r.Status == trigger.RunSucceeded && r.Approvals[0].Outcome == trigger.OutcomeApproved && r.Result == "Sent." &&
			rs.count(id, trigger.NotifyResult) == 1 && told == 1:
		case r.Status == trigger.RunExpired && r.Approvals[0].Outcome == trigger.OutcomeExpired &&
			rs.count(id, trigger.NotifyExpired) == 1 && told == 1:
		default:
			t.Errorf("%s: run %s outcome %q result %q; told result %d, expiry %d times", id, r.Status, r.Approvals[0].Outcome, r.Result,
				rs.count(id, trigger.NotifyResult), rs.count(id, trigger.NotifyExpired))
		}
	}
}
