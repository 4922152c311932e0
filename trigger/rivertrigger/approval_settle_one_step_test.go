package rivertrigger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// diesAfterRunStore is a Store whose process dies right after the run's
// record: every Update fails once down is set.
type diesAfterRunStore struct {
	*rivertrigger.Store
	down atomic.Bool
}

func (d *diesAfterRunStore) Update(ctx context.Context, t *trigger.Task) error {
	if d.down.Load() {
		return errors.New("the process died")
	}
	return d.Store.Update(ctx, t)
}

// A replica settles a waiting run and dies before any later write: the
// task is COMPLETED with its run, in the settlement's transaction, and
// the answer's notice goes out through River (another replica works it).
// Before, the task's move was an Update of its own after SwapRun, and the
// task stayed PENDING_APPROVAL for good.
func TestReplicaDyingAfterTheSettlementLeavesNoTaskPendingApproval(t *testing.T) {
	rs := newReplicas(t, time.Hour)
	a, _ := rs.start(t)
	ctx := context.Background()
	if err := a.CreateTask(ctx, mailTask("mail", time.Now().Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the run waiting", func() (bool, error) {
		task, err := a.Get(ctx, "acme", "mail")
		return err == nil && task.Status == trigger.StatusPendingApproval, err
	})
	s, err := rivertrigger.New(rs.pool, rivertrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dying := &diesAfterRunStore{Store: s}
	dying.down.Store(true)
	b, err := trigger.New(trigger.Config{Store: dying})
	if err != nil {
		t.Fatal(err)
	}
	_ = b.ApprovalSettled(ctx, trigger.Settled{TenantID: "acme", TaskID: "mail", ApprovalID: "ap-mail",
		Outcome: trigger.OutcomeApproved, Result: "Sent to team@example.com."})
	task, err := a.Get(ctx, "acme", "mail")
	if err != nil {
		t.Fatal(err)
	}
	runs, err := a.Runs(ctx, "acme", "mail", 0)
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Status != trigger.RunSucceeded || task.Status != trigger.StatusCompleted {
		t.Fatalf("after the settling replica died: run %s, task %s; want SUCCEEDED and COMPLETED", runs[0].Status, task.Status)
	}
	waitFor(t, 20*time.Second, "the answer told", func() (bool, error) {
		return rs.count("mail", trigger.NotifyResult) == 1, nil
	})
}
