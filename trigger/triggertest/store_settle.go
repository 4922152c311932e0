package triggertest

// The RunSettler case of RunStore: a waiting run's end and its task's
// move are written together, or neither.

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// testSettleRun checks a store that is a trigger.RunSettler: SettleRun
// writes the run and the task together; a stale run or a stale task
// revision is ErrConflict and writes neither; a task other than the run's
// is ErrInvalid; a second settler holding the same records loses whole.
func testSettleRun(t *testing.T, s trigger.Store) {
	st, ok := s.(trigger.RunSettler)
	if !ok {
		t.Skipf("%T is not a trigger.RunSettler", s)
	}
	ctx := context.Background()
	task := NewTask("t1", "mail")
	task.Status = trigger.StatusPendingApproval
	task.NextRun = time.Time{}
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	r := NewRun("t1", "mail", base)
	r.Status, r.FinishedAt = trigger.RunWaiting, time.Time{}
	r.Approvals = []trigger.Approval{{ID: "ap-1", Summary: "Send it"}}
	if err := s.AddRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	read := func() (trigger.Run, *trigger.Task) {
		t.Helper()
		runs, err := s.Runs(ctx, "t1", "mail", 1)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "t1", "mail")
		if err != nil {
			t.Fatal(err)
		}
		return runs[0], got
	}
	old, stored := read()
	ended := old
	ended.Approvals = []trigger.Approval{{ID: "ap-1", Summary: "Send it", Outcome: trigger.OutcomeApproved}}
	ended.Status, ended.Result, ended.FinishedAt = trigger.RunSucceeded, "Sent.", base.Add(time.Minute)

	// A stale task revision: neither is written.
	staleTask := stored.Clone()
	staleTask.Status, staleTask.Revision = trigger.StatusCompleted, stored.Revision-1
	wantErr(t, "SettleRun with a stale task revision", st.SettleRun(ctx, old, ended, staleTask), trigger.ErrConflict)
	if r2, t2 := read(); r2.Status != trigger.RunWaiting || t2.Revision != stored.Revision {
		t.Fatalf("a refused SettleRun wrote: run %s, task revision %d (was %d)", r2.Status, t2.Revision, stored.Revision)
	}
	// A stale run: neither is written.
	staleRun := old
	staleRun.Result = "something else"
	next := stored.Clone()
	next.Status = trigger.StatusCompleted
	wantErr(t, "SettleRun over a stale run", st.SettleRun(ctx, staleRun, ended, next), trigger.ErrConflict)
	if r2, t2 := read(); r2.Status != trigger.RunWaiting || t2.Status != trigger.StatusPendingApproval || t2.Revision != stored.Revision {
		t.Fatalf("a refused SettleRun wrote: run %s, task %s revision %d", r2.Status, t2.Status, t2.Revision)
	}
	// Another task's record: ErrInvalid.
	wrong := stored.Clone()
	wrong.ID = "other"
	wantErr(t, "SettleRun with another task", st.SettleRun(ctx, old, ended, wrong), trigger.ErrInvalid)

	// The settlement: both written, t updated as by Update.
	if err := st.SettleRun(ctx, old, ended, next); err != nil {
		t.Fatalf("SettleRun: %v", err)
	}
	if next.Revision != stored.Revision+1 {
		t.Fatalf("SettleRun left t at revision %d, want %d", next.Revision, stored.Revision+1)
	}
	r2, t2 := read()
	if r2.Status != trigger.RunSucceeded || r2.Result != "Sent." || r2.Approvals[0].Outcome != trigger.OutcomeApproved {
		t.Fatalf("run after SettleRun: %+v", r2)
	}
	if t2.Status != trigger.StatusCompleted || t2.Revision != next.Revision {
		t.Fatalf("task after SettleRun: %s revision %d", t2.Status, t2.Revision)
	}
	// A second settler holding the same records (another replica): loses
	// whole.
	late := ended
	late.Approvals = []trigger.Approval{{ID: "ap-1", Summary: "Send it", Outcome: trigger.OutcomeExpired}}
	late.Status, late.Result = trigger.RunExpired, ""
	again := stored.Clone()
	again.Status = trigger.StatusActive
	wantErr(t, "a second SettleRun over the same records", st.SettleRun(ctx, old, late, again), trigger.ErrConflict)
	if r3, t3 := read(); r3.Status != trigger.RunSucceeded || t3.Status != trigger.StatusCompleted || t3.Revision != t2.Revision {
		t.Fatalf("the losing settler wrote: run %s, task %s revision %d", r3.Status, t3.Status, t3.Revision)
	}
}
