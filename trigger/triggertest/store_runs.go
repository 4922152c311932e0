package triggertest

// The run-history cases of RunStore: runs kept per task, their statuses,
// the bound on how many are kept, and cancelled runs.

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

func testRuns(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mustCreate(t, s, NewTask("t1", "a"))
	mustCreate(t, s, NewTask("t1", "b"))
	var added []trigger.Run
	for i := range 5 {
		r := NewRun("t1", "a", base.Add(time.Duration(i)*time.Hour))
		r.Attempt = i + 1
		if err := s.AddRun(ctx, r); err != nil {
			t.Fatal(err)
		}
		added = append(added, r)
	}
	if err := s.AddRun(ctx, NewRun("t1", "b", base)); err != nil {
		t.Fatal(err)
	}
	all, err := s.Runs(ctx, "t1", "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Fatalf("Runs = %v, want 5 runs", runIDs(all))
	}
	for i, r := range all {
		if w := normRun(added[4-i]); !reflect.DeepEqual(normRun(r), w) {
			t.Fatalf("Runs[%d] = %+v, want %+v (newest first)", i, r, w)
		}
	}
	two, err := s.Runs(ctx, "t1", "a", 2)
	if err != nil || !reflect.DeepEqual(runIDs(two), runIDs(all[:2])) {
		t.Fatalf("Runs with limit 2 = %v, %v; want %v", runIDs(two), err, runIDs(all[:2]))
	}
	if b, err := s.Runs(ctx, "t1", "b", 0); err != nil || len(b) != 1 {
		t.Fatalf("task b's runs = %v, %v; want its one", runIDs(b), err)
	}

	wantErr(t, "AddRun of an existing run", s.AddRun(ctx, added[2]), trigger.ErrConflict)
	wantErr(t, "AddRun to a missing task", s.AddRun(ctx, NewRun("t1", "nope", base)), trigger.ErrNotFound)

	// A run moves through its attempts under one id.
	r := added[1]
	r.Status, r.Attempt, r.FinishedAt, r.Result = trigger.RunRunning, 3, time.Time{}, ""
	if err := s.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.Status, r.Error, r.FinishedAt = trigger.RunDead, "boom", r.StartedAt.Add(time.Minute)
	if err := s.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	all, err = s.Runs(ctx, "t1", "a", 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("Runs after UpdateRun = %v, %v", runIDs(all), err)
	}
	if !reflect.DeepEqual(normRun(all[3]), normRun(r)) {
		t.Fatalf("updated run = %+v, want %+v, in its place", all[3], r)
	}
	unknown := NewRun("t1", "a", base.Add(-time.Hour))
	wantErr(t, "UpdateRun of a missing run", s.UpdateRun(ctx, unknown), trigger.ErrNotFound)
	wantErr(t, "UpdateRun on a missing task", s.UpdateRun(ctx, NewRun("t1", "nope", base)), trigger.ErrNotFound)
	otherTask := added[0]
	otherTask.TaskID = "b" // a's run id under task b: not b's run
	wantErr(t, "UpdateRun under another task", s.UpdateRun(ctx, otherTask), trigger.ErrNotFound)
}

// testRunStatuses records a run in every status, a refused one keeping
// both its reason for the user (Result) and its error: each reads back
// as it was written.
func testRunStatuses(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mustCreate(t, s, NewTask("t1", "a"))
	statuses := []trigger.RunStatus{trigger.RunRunning, trigger.RunSucceeded, trigger.RunFailed, trigger.RunDead,
		trigger.RunWaiting, trigger.RunExpired, trigger.RunRefused}
	for i, st := range statuses {
		r := NewRun("t1", "a", base.Add(time.Duration(i)*time.Hour))
		r.Status = st
		switch st {
		case trigger.RunRunning:
			r.FinishedAt, r.Result = time.Time{}, ""
		case trigger.RunFailed, trigger.RunDead:
			r.Result, r.Error = "", "boom"
		case trigger.RunWaiting:
			r.Approvals = []trigger.Approval{{ID: "ap1", Summary: "send the email", ExpiresAt: base.Add(24 * time.Hour)}}
		case trigger.RunRefused:
			r.Result = "Your daily spending limit is reached. Please try again tomorrow."
			r.Error = "trigger: run refused: spend limit reached: all tenants spent $1300.00 today"
			r.Consumed = trigger.Usage{}
		}
		if err := s.AddRun(ctx, r); err != nil {
			t.Fatalf("AddRun of a %s run: %v", st, err)
		}
		r.Attempt = 2
		if err := s.UpdateRun(ctx, r); err != nil {
			t.Fatalf("UpdateRun of a %s run: %v", st, err)
		}
		runs, err := s.Runs(ctx, "t1", "a", 1)
		if err != nil || len(runs) != 1 {
			t.Fatalf("Runs after a %s run = %v, %v", st, runIDs(runs), err)
		}
		if !reflect.DeepEqual(normRun(runs[0]), normRun(r)) {
			t.Fatalf("a %s run reads back as\n %+v\nwant\n %+v", st, runs[0], r)
		}
	}
}

// testRunsBounded adds more runs than a store need keep: what it keeps
// are the newest added, in order, and it keeps some.
func testRunsBounded(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mustCreate(t, s, NewTask("t1", "a"))
	const n = 300
	for i := range n {
		if err := s.AddRun(ctx, NewRun("t1", "a", base.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := s.Runs(ctx, "t1", "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) == 0 || len(kept) > n {
		t.Fatalf("kept %d runs of %d", len(kept), n)
	}
	for i, r := range kept {
		if want := trigger.RunID("a", base.Add(time.Duration(n-1-i)*time.Minute)); r.ID != want {
			t.Fatalf("kept run %d is %s, want %s: the newest, newest first", i, r.ID, want)
		}
	}
	// A dropped run cannot be updated.
	if len(kept) < n {
		old := NewRun("t1", "a", base)
		wantErr(t, "UpdateRun of a dropped run", s.UpdateRun(ctx, old), trigger.ErrNotFound)
	}
}

func testCancelled(t *testing.T, s trigger.Store) {
	mustCreate(t, s, NewTask("t1", "a"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	task := NewTask("t1", "b")
	checks := map[string]error{
		"Create":    s.Create(ctx, task),
		"Update":    s.Update(ctx, mustGet(t, s, "t1", "a")),
		"Delete":    s.Delete(ctx, "t1", "a"),
		"AddRun":    s.AddRun(ctx, NewRun("t1", "a", base)),
		"UpdateRun": s.UpdateRun(ctx, NewRun("t1", "a", base)),
	}
	_, checks["Get"] = s.Get(ctx, "t1", "a")
	_, checks["List"] = s.List(ctx, "t1")
	_, checks["Runs"] = s.Runs(ctx, "t1", "a", 0)
	_, checks["Due"] = s.Due(ctx, base.Add(2*time.Hour), 10)
	for name, err := range checks {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", name, err)
		}
	}
	if got := mustGet(t, s, "t1", "a"); got.Revision != 1 {
		t.Errorf("a cancelled Update was applied: revision %d", got.Revision)
	}
	if _, err := s.Get(context.Background(), "t1", "b"); !errors.Is(err, trigger.ErrNotFound) {
		t.Errorf("a cancelled Create was applied: %v", err)
	}
}
