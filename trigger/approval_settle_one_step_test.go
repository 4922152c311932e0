package trigger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/trigger"
)

// dyingStore is a MemoryStore whose process "dies" once down is set:
// every Update from then on fails, as a write after the run's record
// would never happen in a process killed between the two.
type dyingStore struct {
	*trigger.MemoryStore
	down atomic.Bool
}

var errDied = errors.New("the process died")

func (d *dyingStore) Update(ctx context.Context, t *trigger.Task) error {
	if d.down.Load() {
		return errDied
	}
	return d.MemoryStore.Update(ctx, t)
}

// A process that records the end of an approved run and dies before it
// moves the task out of PENDING_APPROVAL left the task stuck there for
// good: the run was settled, so a later answer was ignored. The run's end
// and the task's move are now one step (RunSettler): the task is COMPLETED
// with its run.
func TestSettledRunMovesItsTaskInTheSameStep(t *testing.T) {
	ds := &dyingStore{MemoryStore: trigger.NewMemoryStore()}
	h := newHarness(t, trigger.Config{Store: ds})
	h.exec.setFn(waitingExec(h))
	h.create(t, scheduleTask("t1", "once", trigger.Schedule{At: at(1, 9, 0)}))
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "the run waiting", func() bool {
		return h.get(t, "t1", "once").Status == trigger.StatusPendingApproval
	})
	r := h.runs(t, "t1", "once")[0]
	ds.down.Store(true) // dies after whatever the settlement writes first
	_ = h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t1", TaskID: "once",
		ApprovalID: r.Approvals[0].ID, Outcome: trigger.OutcomeApproved, Result: "Sent."})
	ds.down.Store(false) // restarted
	// The user answers again after the restart: settled already, ignored.
	if err := h.e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t1", TaskID: "once",
		ApprovalID: r.Approvals[0].ID, Outcome: trigger.OutcomeApproved, Result: "Sent."}); err != nil {
		t.Fatal(err)
	}
	run := h.runs(t, "t1", "once")[0]
	task := h.get(t, "t1", "once")
	if run.Status != trigger.RunSucceeded || task.Status != trigger.StatusCompleted {
		t.Fatalf("after a death between the two steps: run %s, task %s; want SUCCEEDED and COMPLETED",
			run.Status, task.Status)
	}
}

// Two replicas (two engines, each with its own lock) on one MemoryStore
// settle one run's approval with different answers at once: one answer
// wins, whole — the run's outcome, its result and the task's status agree
// — and the other writes nothing.
func TestTwoReplicasSettleOneRunAndItsTaskOnce(t *testing.T) {
	ms := trigger.NewMemoryStore()
	h := newHarness(t, trigger.Config{Store: ms})
	h.exec.setFn(waitingExec(h))
	other := newHarness(t, trigger.Config{Store: ms})
	h.create(t, scheduleTask("t1", "once", trigger.Schedule{At: at(1, 9, 0)}))
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "the run waiting", func() bool {
		return h.get(t, "t1", "once").Status == trigger.StatusPendingApproval
	})
	before := h.get(t, "t1", "once")
	id := h.runs(t, "t1", "once")[0].Approvals[0].ID
	answers := map[string]string{trigger.OutcomeApproved: "Sent.", trigger.OutcomeExpired: ""}
	var wg sync.WaitGroup
	for e, outcome := range map[*trigger.Engine]string{h.e: trigger.OutcomeApproved, other.e: trigger.OutcomeExpired} {
		wg.Go(func() {
			if err := e.ApprovalSettled(context.Background(), trigger.Settled{TenantID: "t1", TaskID: "once",
				ApprovalID: id, Outcome: outcome, Result: answers[outcome]}); err != nil {
				t.Errorf("settling as %s: %v", outcome, err)
			}
		})
	}
	wg.Wait()
	run := h.runs(t, "t1", "once")[0]
	task := h.get(t, "t1", "once")
	switch run.Approvals[0].Outcome {
	case trigger.OutcomeApproved:
		if run.Status != trigger.RunSucceeded || run.Result != "Sent." || task.Status != trigger.StatusCompleted {
			t.Fatalf("approved: run %s %q, task %s", run.Status, run.Result, task.Status)
		}
	case trigger.OutcomeExpired:
		if run.Status != trigger.RunExpired || task.Status != trigger.StatusActive {
			t.Fatalf("expired: run %s, task %s", run.Status, task.Status)
		}
	default:
		t.Fatalf("outcome %q", run.Approvals[0].Outcome)
	}
	if task.Revision != before.Revision+1 {
		t.Fatalf("task revision %d after one settlement from %d: the loser wrote too", task.Revision, before.Revision)
	}
}
