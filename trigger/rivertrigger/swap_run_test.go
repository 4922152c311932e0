package rivertrigger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

// SwapRun writes a run only over the record it was given: a second
// writer holding the same old record gets ErrConflict; a run that is not
// there is ErrNotFound; swapping for another run is ErrInvalid.
// KeepSettled and TakeSettled hand a kept settlement to one taker, and
// refuse a task the tenant does not have.
func TestSwapRunAndKeptSettlements(t *testing.T) {
	s, _ := newStore(t, rivertrigger.Config{})
	ctx := context.Background()
	task := triggertest.NewTask("acme", "mail")
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	r := triggertest.NewRun("acme", "mail", base)
	r.Status, r.FinishedAt = trigger.RunWaiting, time.Time{}
	r.Approvals = []trigger.Approval{{ID: "ap-1", Summary: "Send it"}}
	if err := s.AddRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	runs, err := s.Runs(ctx, "acme", "mail", 1)
	if err != nil {
		t.Fatal(err)
	}
	old := runs[0]
	one, two := old, old
	one.Approvals = []trigger.Approval{{ID: "ap-1", Summary: "Send it", Outcome: trigger.OutcomeApproved}}
	two.Approvals = []trigger.Approval{{ID: "ap-1", Summary: "Send it", Outcome: trigger.OutcomeCancelled}}
	if err := s.SwapRun(ctx, old, one); err != nil {
		t.Fatalf("first swap: %v", err)
	}
	if err := s.SwapRun(ctx, old, two); !errors.Is(err, trigger.ErrConflict) {
		t.Fatalf("second swap over the same old record: %v, want ErrConflict", err)
	}
	runs, _ = s.Runs(ctx, "acme", "mail", 1)
	if runs[0].Approvals[0].Outcome != trigger.OutcomeApproved {
		t.Fatalf("stored after the swaps: %+v", runs[0].Approvals)
	}
	gone := old
	gone.ID = "nope"
	if err := s.SwapRun(ctx, gone, gone); !errors.Is(err, trigger.ErrNotFound) {
		t.Fatalf("swapping a run that is not there: %v, want ErrNotFound", err)
	}
	if err := s.SwapRun(ctx, old, gone); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("swapping for another run: %v, want ErrInvalid", err)
	}

	st := trigger.Settled{TenantID: "acme", TaskID: "mail", ApprovalID: "ap-2", Outcome: trigger.OutcomeApproved, Result: "Sent."}
	if err := s.KeepSettled(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := s.KeepSettled(ctx, trigger.Settled{TenantID: "evil", TaskID: "mail", ApprovalID: "ap-2",
		Outcome: trigger.OutcomeCancelled}); !errors.Is(err, trigger.ErrNotFound) {
		t.Fatalf("keeping a settlement of a task the tenant does not have: %v, want ErrNotFound", err)
	}
	got, err := s.TakeSettled(ctx, "acme", "mail", []string{"ap-2", "ap-3"})
	if err != nil || len(got) != 1 || got[0] != st {
		t.Fatalf("TakeSettled = %+v, %v; want the kept settlement", got, err)
	}
	if again, err := s.TakeSettled(ctx, "acme", "mail", []string{"ap-2"}); err != nil || len(again) != 0 {
		t.Fatalf("TakeSettled again = %+v, %v; want nothing: taken once", again, err)
	}
}
