package triggertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// NewStore makes an empty store for one subtest, isolated from every
// other one it makes, cleaning up with t.Cleanup. Subtests run in
// parallel, so it is called concurrently.
type NewStore = func(t *testing.T) trigger.Store

// base is the time the suite's tasks and runs are set around.
var base = time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)

// RunStore checks that the stores newStore makes behave as
// [trigger.Store] documents. Each check is a parallel subtest with a
// store of its own.
func RunStore(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s trigger.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Invalid", testInvalid},
		{"InvalidIDs", testInvalidIDs},
		{"Exists", testExists},
		{"TenantIsolation", testTenantIsolation},
		{"Copies", testCopies},
		{"Update", testUpdate},
		{"UpdateRace", testUpdateRace},
		{"Delete", testDelete},
		{"List", testList},
		{"Due", testDue},
		{"Runs", testRuns},
		{"RunsBounded", testRunsBounded},
		{"RunStatuses", testRunStatuses},
		{"CancelledContext", testCancelled},
		{"SettleRun", testSettleRun},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// NewTask returns a valid ACTIVE task of tenantID with every field set.
// Tests of a Store may use it as a starting point.
func NewTask(tenantID, id string) *trigger.Task {
	return &trigger.Task{
		ID:             id,
		TenantID:       tenantID,
		ConversationID: "conv-" + id,
		Name:           "task " + id,
		Description:    "what " + id + " is for",
		Trigger: trigger.Trigger{
			Kind:   trigger.KindEvent,
			Source: "github",
			Type:   "issue.opened",
			Filter: map[string]string{"repo.name": "valet", "issue.label": "bug"},
		},
		Action: trigger.Action{
			Instruction: "Summarise the new issue.",
			Config:      map[string]string{"lang": "en"},
		},
		Output:   trigger.Output{Channel: "slack", Target: "#alerts"},
		Status:   trigger.StatusActive,
		Priority: 4,
		NextRun:  base.Add(time.Hour),
		LastRun:  base.Add(-time.Hour),
		Retry:    trigger.Retry{MaxAttempts: 5, Backoff: time.Minute},
		Budget:   trigger.Budget{MaxTokens: 1000, MaxCostUSD: 0.5, MaxWall: time.Minute, MaxToolCalls: 7},
	}
}

// NewRun returns a valid succeeded run of the task due at dueAt.
func NewRun(tenantID, taskID string, dueAt time.Time) trigger.Run {
	return trigger.Run{
		ID:         trigger.RunID(taskID, dueAt),
		TaskID:     taskID,
		TenantID:   tenantID,
		DueAt:      dueAt,
		StartedAt:  dueAt.Add(time.Second),
		FinishedAt: dueAt.Add(3 * time.Second),
		Status:     trigger.RunSucceeded,
		Attempt:    1,
		Result:     "done",
		Consumed:   trigger.Usage{Tokens: 120, CostUSD: 0.01, Wall: 2 * time.Second, ToolCalls: 2},
	}
}

// normTime makes times comparable across backends: UTC, millisecond
// precision, no monotonic reading.
func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0).Truncate(time.Millisecond)
}

func normTask(t *trigger.Task) *trigger.Task {
	c := t.Clone()
	for _, p := range []*time.Time{&c.NextRun, &c.LastRun, &c.CreatedAt, &c.UpdatedAt,
		&c.Trigger.Schedule.At, &c.Trigger.Schedule.Start} {
		*p = normTime(*p)
	}
	if len(c.Trigger.Filter) == 0 {
		c.Trigger.Filter = nil
	}
	if len(c.Action.Config) == 0 {
		c.Action.Config = nil
	}
	return c
}

func normRun(r trigger.Run) trigger.Run {
	r.DueAt, r.StartedAt, r.FinishedAt = normTime(r.DueAt), normTime(r.StartedAt), normTime(r.FinishedAt)
	return r
}

func sameTask(t *testing.T, what string, want, got *trigger.Task) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil task", what)
	}
	if w, g := normTask(want), normTask(got); !reflect.DeepEqual(w, g) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, g, w)
	}
}

func ids(ts []*trigger.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.TenantID + "/" + t.ID
	}
	return out
}

func runIDs(rs []trigger.Run) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
}

func mustCreate(t *testing.T, s trigger.Store, task *trigger.Task) {
	t.Helper()
	if err := s.Create(context.Background(), task); err != nil {
		t.Fatalf("Create %s/%s: %v", task.TenantID, task.ID, err)
	}
}

func mustGet(t *testing.T, s trigger.Store, tenantID, id string) *trigger.Task {
	t.Helper()
	got, err := s.Get(context.Background(), tenantID, id)
	if err != nil {
		t.Fatalf("Get %s/%s: %v", tenantID, id, err)
	}
	return got
}

func testRoundTrip(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	kinds := map[string]trigger.Trigger{
		"event": NewTask("t1", "x").Trigger,
		"schedule": {Kind: trigger.KindSchedule, Missed: trigger.Skip,
			Schedule: trigger.Schedule{Cron: "0 9 * * MON-FRI", Zone: "Europe/Paris"}},
		"every":     {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Every: time.Hour, Start: base}},
		"at":        {Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: base.Add(48 * time.Hour)}},
		"condition": {Kind: trigger.KindCondition, Condition: "inbox_unread", Every: 5 * time.Minute},
	}
	for id, g := range kinds {
		task := NewTask("t1", id)
		task.Trigger = g
		want := task.Clone()
		mustCreate(t, s, task)
		if task.Revision != 1 {
			t.Errorf("%s: Create set Revision %d, want 1", id, task.Revision)
		}
		if task.CreatedAt.IsZero() || task.UpdatedAt.IsZero() {
			t.Errorf("%s: Create left CreatedAt %v, UpdatedAt %v", id, task.CreatedAt, task.UpdatedAt)
		}
		want.Revision, want.CreatedAt, want.UpdatedAt = task.Revision, task.CreatedAt, task.UpdatedAt
		sameTask(t, "Get "+id, want, mustGet(t, s, "t1", id))
	}

	// Optional fields left empty stay empty; a given CreatedAt is kept.
	small := &trigger.Task{ID: "small", TenantID: "t1", Name: "minimal", Status: trigger.StatusPaused,
		Trigger:   trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Every: time.Minute}},
		Action:    trigger.Action{Instruction: "ping"},
		CreatedAt: base.Add(-24 * time.Hour)}
	want := small.Clone()
	mustCreate(t, s, small)
	if !small.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("Create changed a given CreatedAt %v to %v", want.CreatedAt, small.CreatedAt)
	}
	want.Revision, want.UpdatedAt = 1, small.UpdatedAt
	sameTask(t, "Get small", want, mustGet(t, s, "t1", "small"))
	if _, err := s.Get(ctx, "t1", "nope"); !errors.Is(err, trigger.ErrNotFound) {
		t.Fatalf("Get of a missing task: %v, want ErrNotFound", err)
	}
}

func testInvalid(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	bad := map[string]func(*trigger.Task){
		"no ID":              func(x *trigger.Task) { x.ID = "" },
		"no tenant":          func(x *trigger.Task) { x.TenantID = "" },
		"no name":            func(x *trigger.Task) { x.Name = "" },
		"no status":          func(x *trigger.Task) { x.Status = "" },
		"unknown status":     func(x *trigger.Task) { x.Status = "active" },
		"priority 10":        func(x *trigger.Task) { x.Priority = 10 },
		"negative priority":  func(x *trigger.Task) { x.Priority = -1 },
		"no kind":            func(x *trigger.Task) { x.Trigger.Kind = "" },
		"bad filter path":    func(x *trigger.Task) { x.Trigger.Filter = map[string]string{"repo..name": "v"} },
		"no instruction":     func(x *trigger.Task) { x.Action.Instruction = " " },
		"negative budget":    func(x *trigger.Task) { x.Budget.MaxTokens = -1 },
		"negative retry":     func(x *trigger.Task) { x.Retry.MaxAttempts = -1 },
		"target, no channel": func(x *trigger.Task) { x.Output.Channel = "" },
		"invalid ID":         func(x *trigger.Task) { x.ID = "a\x00b" },
		"bad schedule": func(x *trigger.Task) {
			x.Trigger = trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "61 * * * *"}}
		},
	}
	for name, mutate := range bad {
		task := NewTask("t1", "bad")
		mutate(task)
		wantErr(t, "Create with "+name, s.Create(ctx, task), trigger.ErrInvalid)
		if task.Revision != 0 {
			t.Errorf("Create with %s set Revision %d", name, task.Revision)
		}
	}
	wantErr(t, "Create nil", s.Create(ctx, nil), trigger.ErrInvalid)
	wantErr(t, "Update nil", s.Update(ctx, nil), trigger.ErrInvalid)
	if _, err := s.Get(ctx, "t1", "bad"); !errors.Is(err, trigger.ErrNotFound) {
		t.Fatalf("an invalid task was stored: Get: %v", err)
	}

	good := NewTask("t1", "good")
	mustCreate(t, s, good)
	upd := good.Clone()
	upd.Priority = 12
	wantErr(t, "Update with priority 12", s.Update(ctx, upd), trigger.ErrInvalid)
	if got := mustGet(t, s, "t1", "good"); got.Priority != good.Priority || got.Revision != 1 {
		t.Fatalf("an invalid Update was stored: priority %d, revision %d", got.Priority, got.Revision)
	}

	if _, err := s.List(ctx, "t1", "RUNNING"); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("List with an unknown status: %v, want ErrInvalid", err)
	}
	for _, limit := range []int{0, -1} {
		if _, err := s.Due(ctx, base, limit); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Due with limit %d: %v, want ErrInvalid", limit, err)
		}
	}
	if _, err := s.Runs(ctx, "t1", "good", -1); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("Runs with limit -1: %v, want ErrInvalid", err)
	}
	badRuns := map[string]func(*trigger.Run){
		"no ID":            func(r *trigger.Run) { r.ID = "" },
		"no due time":      func(r *trigger.Run) { r.DueAt = time.Time{} },
		"attempt 0":        func(r *trigger.Run) { r.Attempt = 0 },
		"unknown status":   func(r *trigger.Run) { r.Status = "ok" },
		"finished early":   func(r *trigger.Run) { r.FinishedAt = r.StartedAt.Add(-time.Second) },
		"negative usage":   func(r *trigger.Run) { r.Consumed.Tokens = -1 },
		"running finished": func(r *trigger.Run) { r.Status = trigger.RunRunning },
	}
	for name, mutate := range badRuns {
		r := NewRun("t1", "good", base)
		mutate(&r)
		wantErr(t, "AddRun with "+name, s.AddRun(ctx, r), trigger.ErrInvalid)
	}
	r := NewRun("t1", "good", base)
	r.AgentRunID = "run_0123456789abcdef01234567" // kept as it is
	if err := s.AddRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	r.Attempt = 0
	wantErr(t, "UpdateRun with attempt 0", s.UpdateRun(ctx, r), trigger.ErrInvalid)
	runs, err := s.Runs(ctx, "t1", "good", 0)
	if err != nil || len(runs) != 1 || runs[0].Attempt != 1 || runs[0].AgentRunID != "run_0123456789abcdef01234567" {
		t.Fatalf("after invalid runs: Runs = %v, %v; want the one valid run", runs, err)
	}
}

// testInvalidIDs reads and deletes by ids no task can have (a NUL byte,
// bytes that are not UTF-8, one byte over MaxIDLen): each is ErrInvalid,
// never a database's own error, so that a host mapping ErrNotFound and
// ErrInvalid to its answers never serves an internal error for them.
func testInvalidIDs(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mustCreate(t, s, NewTask("t1", "a"))
	long := make([]byte, trigger.MaxIDLen+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, bad := range map[string]string{"NUL": "a\x00b", "not UTF-8": "a\xffb", "too long": string(long), "empty": ""} {
		if _, err := s.Get(ctx, bad, "a"); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Get with a tenant id %s: %v, want ErrInvalid", name, err)
		}
		if _, err := s.Get(ctx, "t1", bad); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Get with a task id %s: %v, want ErrInvalid", name, err)
		}
		if _, err := s.List(ctx, bad); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("List with a tenant id %s: %v, want ErrInvalid", name, err)
		}
		if _, err := s.Runs(ctx, "t1", bad, 0); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Runs with a task id %s: %v, want ErrInvalid", name, err)
		}
		if _, err := s.Runs(ctx, bad, "a", 0); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Runs with a tenant id %s: %v, want ErrInvalid", name, err)
		}
		if err := s.Delete(ctx, "t1", bad); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Delete with a task id %s: %v, want ErrInvalid", name, err)
		}
		if err := s.Delete(ctx, bad, "a"); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Delete with a tenant id %s: %v, want ErrInvalid", name, err)
		}
	}
	mustGet(t, s, "t1", "a")
}

func testExists(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mustCreate(t, s, NewTask("t1", "a"))
	dup := NewTask("t1", "a")
	dup.Name = "other"
	wantErr(t, "Create of an existing ID", s.Create(ctx, dup), trigger.ErrConflict)
	if got := mustGet(t, s, "t1", "a"); got.Name != "task a" {
		t.Fatalf("a conflicting Create overwrote the task: name %q", got.Name)
	}
	mustCreate(t, s, NewTask("t2", "a")) // same ID, other tenant
}

func testTenantIsolation(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mine := NewTask("alice", "a")
	mustCreate(t, s, mine)
	if err := s.AddRun(ctx, NewRun("alice", "a", base)); err != nil {
		t.Fatal(err)
	}

	if _, err := s.Get(ctx, "bob", "a"); !errors.Is(err, trigger.ErrNotFound) {
		t.Errorf("Get as another tenant: %v, want ErrNotFound", err)
	}
	theirs := mine.Clone()
	theirs.TenantID = "bob"
	theirs.Name = "hijacked"
	wantErr(t, "Update as another tenant", s.Update(ctx, theirs), trigger.ErrNotFound)
	wantErr(t, "Delete as another tenant", s.Delete(ctx, "bob", "a"), trigger.ErrNotFound)
	if _, err := s.Runs(ctx, "bob", "a", 0); !errors.Is(err, trigger.ErrNotFound) {
		t.Errorf("Runs as another tenant: %v, want ErrNotFound", err)
	}
	wantErr(t, "AddRun as another tenant", s.AddRun(ctx, NewRun("bob", "a", base.Add(time.Hour))), trigger.ErrNotFound)
	r := NewRun("bob", "a", base)
	r.Result = "hijacked"
	wantErr(t, "UpdateRun as another tenant", s.UpdateRun(ctx, r), trigger.ErrNotFound)
	if l, err := s.List(ctx, "bob"); err != nil || len(l) != 0 {
		t.Errorf("List of another tenant: %v, %v; want none", ids(l), err)
	}

	got := mustGet(t, s, "alice", "a")
	if got.Name != "task a" || got.Revision != 1 {
		t.Fatalf("another tenant changed the task: %+v", got)
	}
	runs, err := s.Runs(ctx, "alice", "a", 0)
	if err != nil || len(runs) != 1 || runs[0].Result != "done" {
		t.Fatalf("another tenant changed the runs: %+v, %v", runs, err)
	}
}

func testCopies(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	task := NewTask("t1", "a")
	mustCreate(t, s, task)
	want := task.Clone()

	// What the caller passed in is not aliased.
	task.Trigger.Filter["repo.name"] = "changed"
	task.Action.Config["lang"] = "fr"
	task.Name = "changed"
	sameTask(t, "after changing the created task", want, mustGet(t, s, "t1", "a"))

	// Nor what the store handed out.
	got := mustGet(t, s, "t1", "a")
	got.Trigger.Filter["repo.name"] = "changed"
	got.Action.Config["new"] = "x"
	l, err := s.List(ctx, "t1")
	if err != nil || len(l) != 1 {
		t.Fatalf("List: %v, %v", ids(l), err)
	}
	l[0].Trigger.Filter["repo.name"] = "changed"
	d, err := s.Due(ctx, base.Add(2*time.Hour), 10)
	if err != nil || len(d) != 1 {
		t.Fatalf("Due: %v, %v", ids(d), err)
	}
	d[0].Action.Config["lang"] = "de"
	sameTask(t, "after changing returned tasks", want, mustGet(t, s, "t1", "a"))

	// An update's maps are not aliased either.
	upd := mustGet(t, s, "t1", "a")
	if err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	want = upd.Clone()
	upd.Action.Config["lang"] = "it"
	sameTask(t, "after changing the updated task", want, mustGet(t, s, "t1", "a"))

	// Runs come back as copies.
	if err := s.AddRun(ctx, NewRun("t1", "a", base)); err != nil {
		t.Fatal(err)
	}
	runs, _ := s.Runs(ctx, "t1", "a", 0)
	runs[0].Result = "changed"
	runs, _ = s.Runs(ctx, "t1", "a", 0)
	if runs[0].Result != "done" {
		t.Fatalf("changing a returned run changed the store: %q", runs[0].Result)
	}
}

func testUpdate(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	task := NewTask("t1", "a")
	mustCreate(t, s, task)
	created := task.CreatedAt

	upd := mustGet(t, s, "t1", "a")
	upd.Status = trigger.StatusPaused
	upd.NextRun = time.Time{}
	upd.Trigger = trigger.Trigger{Kind: trigger.KindCondition, Condition: "c", Every: time.Minute}
	upd.CreatedAt = base.Add(-100 * time.Hour) // the stored one stays
	if err := s.Update(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if upd.Revision != 2 {
		t.Errorf("Update set Revision %d, want 2", upd.Revision)
	}
	if !normTime(upd.CreatedAt).Equal(normTime(created)) {
		t.Errorf("Update set CreatedAt %v, want the stored %v", upd.CreatedAt, created)
	}
	if upd.UpdatedAt.Before(task.UpdatedAt) {
		t.Errorf("Update moved UpdatedAt back: %v before %v", upd.UpdatedAt, task.UpdatedAt)
	}
	sameTask(t, "Get after Update", upd, mustGet(t, s, "t1", "a"))

	stale := task.Clone() // revision 1
	stale.Name = "stale"
	wantErr(t, "Update at a stale revision", s.Update(ctx, stale), trigger.ErrConflict)
	if stale.Revision != 1 {
		t.Errorf("a failed Update changed Revision to %d", stale.Revision)
	}
	ahead := upd.Clone()
	ahead.Revision = 7
	wantErr(t, "Update at a future revision", s.Update(ctx, ahead), trigger.ErrConflict)
	sameTask(t, "Get after failed Updates", upd, mustGet(t, s, "t1", "a"))

	missing := NewTask("t1", "missing")
	missing.Revision = 1
	wantErr(t, "Update of a missing task", s.Update(ctx, missing), trigger.ErrNotFound)
}

func testUpdateRace(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mustCreate(t, s, NewTask("t1", "a"))
	const n = 16
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		task := mustGet(t, s, "t1", "a") // all at revision 1
		task.Name = fmt.Sprintf("writer %d", i)
		wg.Go(func() {
			<-start
			switch err := s.Update(ctx, task); {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, trigger.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("Update: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != n-1 {
		t.Fatalf("%d updates from one revision: %d won, %d conflicted; want 1 and %d", n, wins.Load(), conflicts.Load(), n-1)
	}
	if got := mustGet(t, s, "t1", "a"); got.Revision != 2 {
		t.Fatalf("revision %d after one winning update, want 2", got.Revision)
	}

	// Writers that re-read on conflict all get through, one revision each.
	var wg2 sync.WaitGroup
	for range n {
		wg2.Go(func() {
			for {
				task, err := s.Get(ctx, "t1", "a")
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				task.Priority = (task.Priority + 1) % (trigger.MaxPriority + 1)
				err = s.Update(ctx, task)
				if err == nil {
					return
				}
				if !errors.Is(err, trigger.ErrConflict) {
					t.Errorf("Update: %v", err)
					return
				}
			}
		})
	}
	wg2.Wait()
	if got := mustGet(t, s, "t1", "a"); got.Revision != 2+n {
		t.Fatalf("revision %d after %d more updates, want %d", got.Revision, n, 2+n)
	}
}

func testDelete(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	mustCreate(t, s, NewTask("t1", "a"))
	mustCreate(t, s, NewTask("t1", "b"))
	if err := s.AddRun(ctx, NewRun("t1", "a", base)); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t1", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "t1", "a"); !errors.Is(err, trigger.ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
	if _, err := s.Runs(ctx, "t1", "a", 0); !errors.Is(err, trigger.ErrNotFound) {
		t.Errorf("Runs after Delete: %v, want ErrNotFound", err)
	}
	wantErr(t, "second Delete", s.Delete(ctx, "t1", "a"), trigger.ErrNotFound)
	mustGet(t, s, "t1", "b")

	// A task created again under the same ID starts afresh.
	again := NewTask("t1", "a")
	mustCreate(t, s, again)
	if again.Revision != 1 {
		t.Errorf("re-created task has Revision %d, want 1", again.Revision)
	}
	runs, err := s.Runs(ctx, "t1", "a", 0)
	if err != nil || len(runs) != 0 {
		t.Fatalf("re-created task has runs %v, %v; want none", runIDs(runs), err)
	}
}

func testList(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	statuses := map[string]trigger.Status{
		"a": trigger.StatusActive, "b": trigger.StatusPaused, "c": trigger.StatusActive,
		"d": trigger.StatusDead, "e": trigger.StatusPendingApproval,
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		task := NewTask("t1", id)
		task.Status = statuses[id]
		mustCreate(t, s, task)
	}
	early := NewTask("t1", "z") // created "before" the others
	early.CreatedAt = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	mustCreate(t, s, early)
	mustCreate(t, s, NewTask("t2", "other"))

	for _, tc := range []struct {
		filter []trigger.Status
		want   []string
	}{
		{nil, []string{"t1/z", "t1/a", "t1/b", "t1/c", "t1/d", "t1/e"}},
		{[]trigger.Status{trigger.StatusActive}, []string{"t1/z", "t1/a", "t1/c"}},
		{[]trigger.Status{trigger.StatusDead, trigger.StatusPaused}, []string{"t1/b", "t1/d"}},
		{[]trigger.Status{trigger.StatusCompleted}, []string{}},
	} {
		got, err := s.List(ctx, "t1", tc.filter...)
		if err != nil {
			t.Fatalf("List %v: %v", tc.filter, err)
		}
		if g := ids(got); !reflect.DeepEqual(g, tc.want) {
			t.Errorf("List %v = %v, want %v", tc.filter, g, tc.want)
		}
	}
	if got, err := s.List(ctx, "nobody"); err != nil || len(got) != 0 {
		t.Errorf("List of an unknown tenant = %v, %v; want none", ids(got), err)
	}
}

func testDue(t *testing.T, s trigger.Store) {
	ctx := context.Background()
	now := base
	add := func(tenant, id string, next time.Duration, prio int, st trigger.Status) {
		task := NewTask(tenant, id)
		task.NextRun, task.Priority, task.Status = now.Add(next), prio, st
		if next == 0 {
			task.NextRun = time.Time{}
		}
		mustCreate(t, s, task)
	}
	add("t1", "late-low", -time.Hour, 0, trigger.StatusActive)
	add("t2", "late-high", -time.Hour, 9, trigger.StatusActive)
	add("t1", "late-mid", -time.Hour, 5, trigger.StatusActive)
	add("t2", "later", -time.Minute, 9, trigger.StatusActive)
	add("t1", "latest", -time.Minute, 1, trigger.StatusActive)
	add("t1", "unscheduled", 0, 9, trigger.StatusActive) // zero NextRun: never due
	add("t3", "same-a", -time.Second, 3, trigger.StatusActive)
	add("t2", "same-a", -time.Second, 3, trigger.StatusActive)
	add("t2", "same-b", -time.Second, 3, trigger.StatusActive)
	add("t1", "future", time.Minute, 9, trigger.StatusActive)
	add("t1", "paused", -time.Hour, 9, trigger.StatusPaused)
	add("t1", "dead", -time.Hour, 9, trigger.StatusDead)
	add("t1", "pending", -time.Hour, 9, trigger.StatusPendingApproval)
	onTime := NewTask("t4", "on-time")
	onTime.NextRun = now
	mustCreate(t, s, onTime)

	want := []string{"t2/late-high", "t1/late-mid", "t1/late-low", "t2/later", "t1/latest",
		"t2/same-a", "t2/same-b", "t3/same-a", "t4/on-time"}
	got, err := s.Due(ctx, now, 100)
	if err != nil {
		t.Fatal(err)
	}
	if g := ids(got); !reflect.DeepEqual(g, want) {
		t.Fatalf("Due =\n %v\nwant\n %v", g, want)
	}
	got, err = s.Due(ctx, now, 4)
	if err != nil {
		t.Fatal(err)
	}
	if g := ids(got); !reflect.DeepEqual(g, want[:4]) {
		t.Fatalf("Due with limit 4 = %v, want %v", g, want[:4])
	}
	got, err = s.Due(ctx, now.Add(-2*time.Hour), 100)
	if err != nil || len(got) != 0 {
		t.Fatalf("Due before every NextRun = %v, %v; want none", ids(got), err)
	}
	// A task paused after it fell due is no longer due.
	p := mustGet(t, s, "t2", "late-high")
	p.Status = trigger.StatusPaused
	if err := s.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	got, err = s.Due(ctx, now, 1)
	if err != nil || len(got) != 1 || got[0].ID != "late-mid" {
		t.Fatalf("Due after pausing the first = %v, %v; want t1/late-mid", ids(got), err)
	}
	sameTask(t, "a task from Due", mustGet(t, s, "t1", "late-mid"), got[0])
}
