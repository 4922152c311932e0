package pooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/pool"
)

// NewStore makes an empty store for one subtest. maxPerTenant and
// retention are the store's cap and retention, 0 meaning the store's
// defaults. It isolates the store from every other one it makes (a key
// prefix, a schema) and removes what it leaves behind with t.Cleanup.
// Subtests run in parallel, so it is called concurrently.
type NewStore = func(t *testing.T, maxPerTenant int, retention time.Duration) pool.Store

// NewLocker makes a Locker for one subtest, isolated from every other one
// it makes, cleaning up with t.Cleanup. It is called concurrently.
type NewLocker = func(t *testing.T) pool.Locker

// timeSlack is how far a time read back may be from the one written:
// stores keep at least millisecond precision.
const timeSlack = time.Millisecond

// Run checks that the stores newStore makes behave as [pool.Store]
// documents. Each check is a parallel subtest with a store of its own.
// The whole suite sleeps for well under two seconds.
func Run(t *testing.T, newStore NewStore) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, newStore NewStore)
	}{
		{"RoundTrip", testRoundTrip},
		{"CreateSetsRevisionAndTimes", testCreateSets},
		{"InvalidEntry", testInvalid},
		{"Exists", testExists},
		{"TenantIsolation", testTenantIsolation},
		{"SeparatorsInKeys", testSeparators},
		{"List", testList},
		{"Update", testUpdate},
		{"UpdateRace", testUpdateRace},
		{"Take", testTake},
		{"TakeRace", testTakeRace},
		{"TakeRevision", testTakeRevision},
		{"TakeRevisionExpired", testTakeRevisionExpired},
		{"TakeRevisionRace", testTakeRevisionRace},
		{"TakeRevisionUpdateRace", testTakeRevisionUpdateRace},
		{"Delete", testDelete},
		{"TenantCap", testCap},
		{"ExpiredStaysReadable", testExpiredReadable},
		{"RetentionEnds", testRetentionEnds},
		{"Copies", testCopies},
		{"CancelledContext", testCancelled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore)
		})
	}
}

// NewEntry returns a valid entry of tenantID with every field set, expiring
// in an hour. Tests of a Store may use it as a starting point.
func NewEntry(tenantID, id string) *pool.Entry {
	now := time.Now().Round(0)
	return &pool.Entry{
		ID:             id,
		AgentName:      "send_email",
		TenantID:       tenantID,
		ConversationID: "conv-" + id,
		Status:         pool.StatusWaitingForApproval,
		Paused:         true,
		SchemaVersion:  "sha256:0123abcd",
		Fields:         json.RawMessage(`{"to": "team@example.com", "subject": "Q3 <draft> & \"notes\"", "n": 2, "nested": {"x": [1, 2.5, null, true]}}`),
		Missing:        []string{"body"},
		Problems:       []string{"to: must be a valid email", "ünïcødé ✓"},
		State:          json.RawMessage(`{"step":2,"seen":["a","b"]}`),
		Approval: &approval.Request{
			ID:            id,
			AgentName:     "send_email",
			ActionSummary: "Send an email to team@example.com",
			Details: map[string]any{
				"to":    "team@example.com",
				"count": 3,
				"tags":  []any{"a", "b"},
				"extra": map[string]any{"cc": "boss@example.com"},
			},
			Options:           []string{"approve", "edit", "cancel"},
			AllowModification: true,
			TenantID:          tenantID,
			ConversationID:    "conv-" + id,
			Source:            approval.SourceTrigger,
			TaskID:            "task-7",
			CreatedAt:         now.Add(-time.Minute),
			ExpiresAt:         now.Add(time.Hour),
		},
		ToolCallID: "call_" + id,
		Source:     approval.SourceTrigger,
		TaskID:     "task-7",
		Task:       "weekly report",
		Revision:   42, // Create must replace it with 1
		CreatedAt:  now.Add(-2 * time.Second),
		UpdatedAt:  now.Add(-time.Second),
		ExpiresAt:  now.Add(time.Hour),
	}
}

// simple returns a minimal valid entry expiring in an hour.
func simple(tenantID, id string) *pool.Entry {
	return &pool.Entry{
		ID:        id,
		AgentName: "agent",
		TenantID:  tenantID,
		Status:    pool.StatusWaitingForInput,
		ExpiresAt: time.Now().Add(time.Hour),
	}
}

// Diff lists the fields in which got differs from want: times compare
// within a millisecond, JSON and approval details by meaning (as decoded
// JSON), and nil and empty slices are equal.
func Diff(want, got *pool.Entry) []string {
	var d []string
	add := func(field string, w, g any) {
		d = append(d, fmt.Sprintf("%s: got %v, want %v", field, g, w))
	}
	str := func(field, w, g string) {
		if w != g {
			add(field, fmt.Sprintf("%q", w), fmt.Sprintf("%q", g))
		}
	}
	tm := func(field string, w, g time.Time) {
		if diff := w.Sub(g); diff >= timeSlack || diff <= -timeSlack || w.IsZero() != g.IsZero() {
			add(field, w, g)
		}
	}
	js := func(field string, w, g []byte) {
		if !sameJSON(w, g) {
			add(field, string(w), string(g))
		}
	}
	strs := func(field string, w, g []string) {
		if len(w) != 0 || len(g) != 0 {
			if !slices.Equal(w, g) {
				add(field, w, g)
			}
		}
	}
	if want == nil || got == nil {
		if want != got {
			add("entry", want, got)
		}
		return d
	}
	str("ID", want.ID, got.ID)
	str("AgentName", want.AgentName, got.AgentName)
	str("TenantID", want.TenantID, got.TenantID)
	str("ConversationID", want.ConversationID, got.ConversationID)
	str("Status", string(want.Status), string(got.Status))
	if want.Paused != got.Paused {
		add("Paused", want.Paused, got.Paused)
	}
	str("SchemaVersion", want.SchemaVersion, got.SchemaVersion)
	js("Fields", want.Fields, got.Fields)
	strs("Missing", want.Missing, got.Missing)
	strs("Problems", want.Problems, got.Problems)
	js("State", want.State, got.State)
	str("ToolCallID", want.ToolCallID, got.ToolCallID)
	str("Source", want.Source, got.Source)
	str("TaskID", want.TaskID, got.TaskID)
	str("Task", want.Task, got.Task)
	if want.Revision != got.Revision {
		add("Revision", want.Revision, got.Revision)
	}
	tm("CreatedAt", want.CreatedAt, got.CreatedAt)
	tm("UpdatedAt", want.UpdatedAt, got.UpdatedAt)
	tm("ExpiresAt", want.ExpiresAt, got.ExpiresAt)

	wa, ga := want.Approval, got.Approval
	switch {
	case wa == nil && ga == nil:
	case wa == nil || ga == nil:
		add("Approval", wa, ga)
	default:
		str("Approval.ID", wa.ID, ga.ID)
		str("Approval.AgentName", wa.AgentName, ga.AgentName)
		str("Approval.ActionSummary", wa.ActionSummary, ga.ActionSummary)
		wd, _ := json.Marshal(wa.Details)
		gd, _ := json.Marshal(ga.Details)
		if len(wa.Details) != 0 || len(ga.Details) != 0 {
			js("Approval.Details", wd, gd)
		}
		strs("Approval.Options", wa.Options, ga.Options)
		if wa.AllowModification != ga.AllowModification {
			add("Approval.AllowModification", wa.AllowModification, ga.AllowModification)
		}
		str("Approval.TenantID", wa.TenantID, ga.TenantID)
		str("Approval.ConversationID", wa.ConversationID, ga.ConversationID)
		str("Approval.Source", wa.Source, ga.Source)
		str("Approval.TaskID", wa.TaskID, ga.TaskID)
		tm("Approval.CreatedAt", wa.CreatedAt, ga.CreatedAt)
		tm("Approval.ExpiresAt", wa.ExpiresAt, ga.ExpiresAt)
	}
	return d
}

// sameJSON reports whether a and b decode to the same value; two empty
// values are the same.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

func mustSame(t *testing.T, what string, want, got *pool.Entry) {
	t.Helper()
	if d := Diff(want, got); len(d) > 0 {
		t.Errorf("%s differs from what was stored:", what)
		for _, line := range d {
			t.Errorf("  %s", line)
		}
	}
}

func mustCreate(t *testing.T, s pool.Store, e *pool.Entry) {
	t.Helper()
	if err := s.Create(context.Background(), e); err != nil {
		t.Fatalf("Create(%q/%q): %v", e.TenantID, e.ID, err)
	}
}

func mustGet(t *testing.T, s pool.Store, tenantID, id string) *pool.Entry {
	t.Helper()
	e, err := s.Get(context.Background(), tenantID, id)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", tenantID, id, err)
	}
	if e == nil {
		t.Fatalf("Get(%q, %q) returned a nil entry and no error", tenantID, id)
	}
	return e
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: error %v, want one matching %v", what, err, target)
	}
}

func wantGone(t *testing.T, s pool.Store, tenantID, id string) {
	t.Helper()
	e, err := s.Get(context.Background(), tenantID, id)
	if !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Get(%q, %q) = %v, %v; want ErrNotFound", tenantID, id, e, err)
	}
}

func ids(entries []*pool.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.TenantID + "/" + e.ID
	}
	return out
}

func testRoundTrip(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	e := NewEntry("t1", "e1")
	if err := s.Create(ctx, e); err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := e.Clone()
	mustSame(t, "Get", want, mustGet(t, s, "t1", "e1"))

	list, err := s.List(ctx, "t1")
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v; want the one entry", ids(list), err)
	}
	mustSame(t, "List", want, list[0])

	// A minimal entry comes back minimal.
	m := simple("t1", "e2")
	mustCreate(t, s, m)
	mustSame(t, "Get of a minimal entry", m.Clone(), mustGet(t, s, "t1", "e2"))

	got, err := s.Take(ctx, "t1", "e1")
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	mustSame(t, "Take", want, got)
}

func testCreateSets(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	before := time.Now()
	e := simple("t", "zero-times")
	e.Revision = 9
	mustCreate(t, s, e)
	after := time.Now()
	if e.Revision != 1 {
		t.Errorf("after Create, e.Revision = %d, want 1", e.Revision)
	}
	for name, tm := range map[string]time.Time{"CreatedAt": e.CreatedAt, "UpdatedAt": e.UpdatedAt} {
		if tm.Before(before.Add(-timeSlack)) || tm.After(after.Add(timeSlack)) {
			t.Errorf("after Create with a zero %s, it is %v; want a time between %v and %v", name, tm, before, after)
		}
	}
	got := mustGet(t, s, "t", "zero-times")
	mustSame(t, "Get", e, got)
	if got.Revision != 1 {
		t.Errorf("stored Revision = %d, want 1", got.Revision)
	}

	// Given times are kept.
	g := simple("t", "given-times")
	g.CreatedAt = time.Date(2024, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	g.UpdatedAt = g.CreatedAt.Add(time.Second)
	mustCreate(t, s, g)
	want := g.Clone()
	want.CreatedAt = time.Date(2024, 5, 6, 7, 8, 9, 123_000_000, time.UTC)
	want.UpdatedAt = want.CreatedAt.Add(time.Second)
	mustSame(t, "Get of an entry created with times", want, mustGet(t, s, "t", "given-times"))
}

func testInvalid(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	cases := map[string]func(e *pool.Entry){
		"no ID":         func(e *pool.Entry) { e.ID = "" },
		"no TenantID":   func(e *pool.Entry) { e.TenantID = "" },
		"no AgentName":  func(e *pool.Entry) { e.AgentName = "" },
		"no Status":     func(e *pool.Entry) { e.Status = "" },
		"unknown state": func(e *pool.Entry) { e.Status = "completed" },
		"no ExpiresAt":  func(e *pool.Entry) { e.ExpiresAt = time.Time{} },
		"bad Fields":    func(e *pool.Entry) { e.Fields = json.RawMessage(`{"to":`) },
		"bad State":     func(e *pool.Entry) { e.State = json.RawMessage(`nope`) },
		// One ID limit across valet (memory.MaxIDLen): an entry that
		// memory would refuse is not parked.
		"long TenantID":       func(e *pool.Entry) { e.TenantID = strings.Repeat("t", pool.MaxIDLen+1) },
		"long ConversationID": func(e *pool.Entry) { e.ConversationID = strings.Repeat("c", pool.MaxIDLen+1) },
		"long TaskID":         func(e *pool.Entry) { e.TaskID = strings.Repeat("k", pool.MaxIDLen+1) },
		"TenantID with NUL":   func(e *pool.Entry) { e.TenantID = "t\x00" },
	}
	for name, breakIt := range cases {
		e := simple("t", "bad")
		breakIt(e)
		wantErr(t, "Create with "+name, s.Create(ctx, e), pool.ErrInvalidEntry)
	}
	wantErr(t, "Create(nil)", s.Create(ctx, nil), pool.ErrInvalidEntry)
	wantGone(t, s, "t", "bad")
	if list, err := s.List(ctx, "t"); err != nil || len(list) != 0 {
		t.Errorf("after invalid creates, List = %v, %v; want nothing", ids(list), err)
	}

	// Update checks the entry too, and stores nothing invalid.
	good := simple("t", "good")
	mustCreate(t, s, good)
	for name, breakIt := range cases {
		if name == "no ID" || name == "no TenantID" || name == "long TenantID" || name == "TenantID with NUL" {
			continue // these name another entry; not found is fine too
		}
		e := good.Clone()
		breakIt(e)
		wantErr(t, "Update with "+name, s.Update(ctx, e), pool.ErrInvalidEntry)
	}
	wantErr(t, "Update(nil)", s.Update(ctx, nil), pool.ErrInvalidEntry)
	mustSame(t, "entry after invalid updates", good, mustGet(t, s, "t", "good"))

	// IDs of MaxIDLen bytes are fine.
	long := simple(strings.Repeat("t", pool.MaxIDLen), "long")
	long.ConversationID, long.TaskID = strings.Repeat("c", pool.MaxIDLen), strings.Repeat("k", pool.MaxIDLen)
	mustCreate(t, s, long)
	mustSame(t, "entry with the longest IDs", long, mustGet(t, s, long.TenantID, "long"))
}

func testExists(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	first := simple("t", "dup")
	first.AgentName = "first"
	mustCreate(t, s, first)
	second := simple("t", "dup")
	second.AgentName = "second"
	second.Revision = 5
	wantErr(t, "second Create", s.Create(context.Background(), second), pool.ErrExists)
	if second.Revision != 5 {
		t.Errorf("failed Create changed e.Revision to %d", second.Revision)
	}
	if got := mustGet(t, s, "t", "dup"); got.AgentName != "first" {
		t.Errorf("after a failed Create the entry has AgentName %q, want %q", got.AgentName, "first")
	}
}

func testTenantIsolation(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	a, b := simple("alice", "same"), simple("bob", "same")
	a.AgentName, b.AgentName = "alice_agent", "bob_agent"
	mustCreate(t, s, a)
	mustCreate(t, s, b) // the same ID in another tenant is another entry
	if got := mustGet(t, s, "alice", "same"); got.AgentName != "alice_agent" {
		t.Errorf("alice's entry has AgentName %q", got.AgentName)
	}
	if got := mustGet(t, s, "bob", "same"); got.AgentName != "bob_agent" {
		t.Errorf("bob's entry has AgentName %q", got.AgentName)
	}

	only := simple("alice", "only-alice")
	mustCreate(t, s, only)
	_, err := s.Get(ctx, "bob", "only-alice")
	wantErr(t, "Get of alice's id as bob", err, pool.ErrNotFound)
	_, err = s.Take(ctx, "bob", "only-alice")
	wantErr(t, "Take of alice's id as bob", err, pool.ErrNotFound)
	_, err = s.TakeRevision(ctx, "bob", "only-alice", only.Revision)
	wantErr(t, "TakeRevision of alice's id as bob", err, pool.ErrNotFound)
	wantErr(t, "Delete of alice's id as bob", s.Delete(ctx, "bob", "only-alice"), pool.ErrNotFound)
	forged := only.Clone()
	forged.TenantID = "bob"
	wantErr(t, "Update of alice's id as bob", s.Update(ctx, forged), pool.ErrNotFound)
	wantGone(t, s, "bob", "only-alice")
	mustGet(t, s, "alice", "only-alice")

	// Taking bob's entry leaves alice's.
	if _, err := s.Take(ctx, "bob", "same"); err != nil {
		t.Fatalf("Take bob's: %v", err)
	}
	mustGet(t, s, "alice", "same")
	list, err := s.List(ctx, "bob")
	if err != nil || len(list) != 0 {
		t.Errorf("List(bob) = %v, %v; want nothing", ids(list), err)
	}
}

// testSeparators: tenants and ids containing the characters a key scheme
// might use as separators stay distinct.
func testSeparators(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	pairs := [][2]string{
		{"a:b", "c"}, {"a", "b:c"}, {"a", "b}:e:c"}, {"a}:e:b", "c"},
		{"{a}", "b"}, {"a", "{b}"}, {"a", "idx"}, {"x y/z*?[", "é:}{"},
	}
	for _, p := range pairs {
		e := simple(p[0], p[1])
		e.AgentName = "agent " + p[0] + "|" + p[1]
		mustCreate(t, s, e)
	}
	for _, p := range pairs {
		if got := mustGet(t, s, p[0], p[1]); got.AgentName != "agent "+p[0]+"|"+p[1] {
			t.Errorf("Get(%q, %q) returned the entry of %q", p[0], p[1], got.AgentName)
		}
	}
	list, err := s.List(ctx, "a")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	want := []string{"a/b:c", "a/b}:e:c", "a/idx", "a/{b}"}
	got := ids(list)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("List(a) = %v, want %v", got, want)
	}
	if _, err := s.Take(ctx, "a", "b:c"); err != nil {
		t.Fatalf("Take: %v", err)
	}
	mustGet(t, s, "a:b", "c")
}

func testList(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).Round(time.Millisecond)
	for _, c := range []struct {
		id  string
		age time.Duration
	}{{"c", 2 * time.Second}, {"a", 0}, {"z", time.Second}, {"b", time.Second}, {"m", 3 * time.Second}} {
		e := simple("t", c.id)
		e.CreatedAt = base.Add(c.age)
		mustCreate(t, s, e)
	}
	mustCreate(t, s, simple("other", "x"))
	list, err := s.List(ctx, "t")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if got, want := ids(list), []string{"t/a", "t/b", "t/z", "t/c", "t/m"}; !slices.Equal(got, want) {
		t.Errorf("List = %v, want oldest first, ties by ID: %v", got, want)
	}
	list, err = s.List(ctx, "nobody")
	if err != nil || len(list) != 0 {
		t.Errorf("List of an unknown tenant = %v, %v; want nothing, no error", ids(list), err)
	}
}

func testUpdate(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	e := NewEntry("t", "u")
	mustCreate(t, s, e)
	stale := e.Clone()
	createdUpdatedAt := e.UpdatedAt

	e.Status = pool.StatusWaitingForInput
	e.Fields = json.RawMessage(`{"to":"new@example.com"}`)
	e.Missing = []string{"subject", "body"}
	e.Approval = nil
	e.ExpiresAt = e.ExpiresAt.Add(time.Hour)
	if err := s.Update(ctx, e); err != nil {
		t.Fatalf("Update: %v", err)
	}
	if e.Revision != 2 {
		t.Errorf("after Update, e.Revision = %d, want 2", e.Revision)
	}
	if e.UpdatedAt.Before(createdUpdatedAt) || time.Since(e.UpdatedAt) > time.Minute {
		t.Errorf("after Update, e.UpdatedAt = %v; want now", e.UpdatedAt)
	}
	mustSame(t, "Get after Update", e, mustGet(t, s, "t", "u"))

	// A writer holding the old revision loses and changes nothing.
	stale.AgentName = "stale"
	wantErr(t, "Update with a stale revision", s.Update(ctx, stale), pool.ErrConflict)
	if stale.Revision != 1 {
		t.Errorf("failed Update changed e.Revision to %d", stale.Revision)
	}
	mustSame(t, "Get after a stale Update", e, mustGet(t, s, "t", "u"))
	ahead := e.Clone()
	ahead.Revision = 7
	wantErr(t, "Update with a revision from the future", s.Update(ctx, ahead), pool.ErrConflict)

	// Revisions keep counting.
	e.Paused = true
	if err := s.Update(ctx, e); err != nil {
		t.Fatalf("second Update: %v", err)
	}
	if got := mustGet(t, s, "t", "u"); got.Revision != 3 || !got.Paused {
		t.Errorf("after two updates: Revision %d, Paused %v; want 3, true", got.Revision, got.Paused)
	}

	// Update never creates.
	if err := s.Delete(ctx, "t", "u"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantErr(t, "Update of a deleted entry", s.Update(ctx, e), pool.ErrNotFound)
	wantGone(t, s, "t", "u")
	never := simple("t", "never")
	never.Revision = 1
	never.CreatedAt = time.Now()
	wantErr(t, "Update of an entry never created", s.Update(ctx, never), pool.ErrNotFound)
	wantGone(t, s, "t", "never")
}

func testUpdateRace(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	e := simple("t", "race")
	mustCreate(t, s, e)
	const n = 16
	var wins, conflicts atomic.Int32
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c := e.Clone()
		c.Task = fmt.Sprint("writer ", i)
		wg.Go(func() {
			<-start
			err := s.Update(context.Background(), c)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, pool.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("racing Update: %v", err)
			}
		})
	}
	close(start)
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != n-1 {
		t.Errorf("%d racing updates of one revision: %d won, %d conflicted; want 1 and %d", n, wins.Load(), conflicts.Load(), n-1)
	}
	if got := mustGet(t, s, "t", "race"); got.Revision != 2 {
		t.Errorf("after the race, Revision = %d, want 2", got.Revision)
	}
}

func testTake(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	e := NewEntry("t", "take")
	mustCreate(t, s, e)
	mustCreate(t, s, simple("t", "stay"))
	got, err := s.Take(ctx, "t", "take")
	if err != nil {
		t.Fatalf("Take: %v", err)
	}
	mustSame(t, "Take", e, got)
	wantGone(t, s, "t", "take")
	_, err = s.Take(ctx, "t", "take")
	wantErr(t, "second Take", err, pool.ErrNotFound)
	_, err = s.Take(ctx, "t", "never")
	wantErr(t, "Take of an unknown id", err, pool.ErrNotFound)
	list, err := s.List(ctx, "t")
	if err != nil || !slices.Equal(ids(list), []string{"t/stay"}) {
		t.Errorf("after Take, List = %v, %v; want [t/stay]", ids(list), err)
	}
	// The id is free again.
	mustCreate(t, s, simple("t", "take"))
}

func testTakeRace(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	const entries, racers = 5, 32
	for i := range entries {
		id := fmt.Sprint("hot-", i)
		mustCreate(t, s, simple("t", id))
		var wins, misses atomic.Int32
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				<-start
				e, err := s.Take(context.Background(), "t", id)
				switch {
				case err == nil && e != nil && e.ID == id:
					wins.Add(1)
				case errors.Is(err, pool.ErrNotFound):
					misses.Add(1)
				default:
					t.Errorf("racing Take: %v, %v", e, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || misses.Load() != racers-1 {
			t.Errorf("%d racing takes of %s: %d won, %d not found; want exactly 1 winner", racers, id, wins.Load(), misses.Load())
		}
		wantGone(t, s, "t", id)
	}
}

func testTakeRevision(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()

	// At the revision Create set.
	e := NewEntry("t", "first")
	mustCreate(t, s, e)
	got, err := s.TakeRevision(ctx, "t", "first", 1)
	if err != nil {
		t.Fatalf("TakeRevision at revision 1 of a new entry: %v", err)
	}
	mustSame(t, "TakeRevision", e, got)
	wantGone(t, s, "t", "first")
	_, err = s.TakeRevision(ctx, "t", "first", 1)
	wantErr(t, "second TakeRevision", err, pool.ErrNotFound)
	_, err = s.TakeRevision(ctx, "t", "never", 1)
	wantErr(t, "TakeRevision of an unknown id", err, pool.ErrNotFound)

	// At the revision an Update left.
	mustCreate(t, s, simple("t", "stay"))
	u := NewEntry("t", "updated")
	mustCreate(t, s, u)
	read := mustGet(t, s, "t", "updated") // what the user saw
	u.Fields = json.RawMessage(`{"to":"everyone@example.com"}`)
	if err := s.Update(ctx, u); err != nil {
		t.Fatalf("Update: %v", err)
	}

	// A stale revision, or one from the future, takes nothing and
	// changes nothing.
	for _, rev := range []int64{read.Revision, u.Revision + 1, 0} {
		got, err := s.TakeRevision(ctx, "t", "updated", rev)
		wantErr(t, fmt.Sprintf("TakeRevision at revision %d of an entry at %d", rev, u.Revision), err, pool.ErrConflict)
		if got != nil {
			t.Errorf("TakeRevision with a conflict returned an entry: %+v", got)
		}
		mustSame(t, fmt.Sprintf("Get after TakeRevision at revision %d", rev), u, mustGet(t, s, "t", "updated"))
	}
	list, err := s.List(ctx, "t")
	if err != nil || !slices.Equal(ids(list), []string{"t/updated", "t/stay"}) { // NewEntry's CreatedAt is older
		t.Errorf("after conflicting TakeRevisions, List = %v, %v; want [t/updated t/stay]", ids(list), err)
	}

	got, err = s.TakeRevision(ctx, "t", "updated", u.Revision)
	if err != nil {
		t.Fatalf("TakeRevision at the current revision %d: %v", u.Revision, err)
	}
	mustSame(t, "TakeRevision after Update", u, got)
	wantGone(t, s, "t", "updated")
	_, err = s.Take(ctx, "t", "updated")
	wantErr(t, "Take after TakeRevision", err, pool.ErrNotFound)
	list, err = s.List(ctx, "t")
	if err != nil || !slices.Equal(ids(list), []string{"t/stay"}) {
		t.Errorf("after TakeRevision, List = %v, %v; want [t/stay]", ids(list), err)
	}
	// The id is free again, and a new entry starts at revision 1.
	mustCreate(t, s, simple("t", "updated"))
	if _, err := s.TakeRevision(ctx, "t", "updated", u.Revision); !errors.Is(err, pool.ErrConflict) {
		t.Errorf("TakeRevision of a recreated entry at the old entry's revision: %v, want ErrConflict", err)
	}
}

// testTakeRevisionExpired: an expired entry is taken like any other until
// its retention ends, as with Take.
func testTakeRevisionExpired(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, time.Hour)
	ctx := context.Background()
	e := simple("t", "expired")
	e.ExpiresAt = time.Now().Add(-time.Minute)
	mustCreate(t, s, e)
	_, err := s.TakeRevision(ctx, "t", "expired", e.Revision+1)
	wantErr(t, "TakeRevision of an expired entry at a stale revision", err, pool.ErrConflict)
	mustSame(t, "Get after the conflict", e, mustGet(t, s, "t", "expired"))
	got, err := s.TakeRevision(ctx, "t", "expired", e.Revision)
	if err != nil {
		t.Fatalf("TakeRevision of an expired entry within retention: %v", err)
	}
	mustSame(t, "TakeRevision of an expired entry", e, got)
	if !got.Expired(time.Now()) {
		t.Errorf("the taken entry reports Expired false")
	}
	wantGone(t, s, "t", "expired")

	// Created past its retention: never there to take.
	old := simple("t", "past-retention")
	old.ExpiresAt = time.Now().Add(-2 * time.Hour)
	mustCreate(t, s, old)
	_, err = s.TakeRevision(ctx, "t", "past-retention", old.Revision)
	wantErr(t, "TakeRevision of an entry past its retention", err, pool.ErrNotFound)
}

// testTakeRevisionRace: of callers racing to take one entry at its
// revision, exactly one gets it and the others ErrNotFound.
func testTakeRevisionRace(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	const entries, racers = 5, 32
	for i := range entries {
		id := fmt.Sprint("hot-", i)
		mustCreate(t, s, simple("t", id))
		rev := mustGet(t, s, "t", id).Revision
		var wins, misses atomic.Int32
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				<-start
				e, err := s.TakeRevision(context.Background(), "t", id, rev)
				switch {
				case err == nil && e != nil && e.ID == id:
					wins.Add(1)
				case errors.Is(err, pool.ErrNotFound):
					misses.Add(1)
				default:
					t.Errorf("racing TakeRevision: %v, %v", e, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || misses.Load() != racers-1 {
			t.Errorf("%d racing TakeRevisions of %s: %d won, %d not found; want exactly 1 winner", racers, id, wins.Load(), misses.Load())
		}
		wantGone(t, s, "t", id)
	}
}

// testTakeRevisionUpdateRace: an edit racing a take of the revision the
// taker read. Each round ends one of two ways: the take won (the entry it
// got is the one read, the edit found nothing, the entry is gone), or the
// edit won (the take conflicted and the edited entry is there). Never
// both, and never an entry lost.
func testTakeRevisionUpdateRace(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	const rounds = 40
	var taken, edited int
	for round := range rounds {
		id := fmt.Sprint("contested-", round)
		mustCreate(t, s, simple("t", id))
		seen := mustGet(t, s, "t", id) // what the user approved
		edit := mustGet(t, s, "t", id) // what the editor changes
		edit.Task = "edited"

		var took *pool.Entry
		var takeErr, updateErr error
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			took, takeErr = s.TakeRevision(context.Background(), "t", id, seen.Revision)
		})
		wg.Go(func() {
			<-start
			updateErr = s.Update(context.Background(), edit)
		})
		close(start)
		wg.Wait()

		switch {
		case takeErr == nil && errors.Is(updateErr, pool.ErrNotFound):
			taken++
			mustSame(t, fmt.Sprintf("round %d: the entry taken", round), seen, took)
			wantGone(t, s, "t", id)
		case errors.Is(takeErr, pool.ErrConflict) && updateErr == nil:
			edited++
			if took != nil {
				t.Errorf("round %d: TakeRevision conflicted and returned an entry", round)
			}
			got, err := s.Get(context.Background(), "t", id)
			if err != nil {
				t.Errorf("round %d: the edit won, but the edited entry is lost: %v", round, err)
				continue
			}
			mustSame(t, fmt.Sprintf("round %d: the edited entry", round), edit, got)
			if got.Task != "edited" || got.Revision != seen.Revision+1 {
				t.Errorf("round %d: after the edit won, Task %q, Revision %d; want %q, %d", round, got.Task, got.Revision, "edited", seen.Revision+1)
			}
		default:
			t.Errorf("round %d: TakeRevision returned %v, Update returned %v; want exactly one to succeed (the other ErrConflict or ErrNotFound)", round, takeErr, updateErr)
		}
	}
	t.Logf("%d rounds: the take won %d, the edit won %d", rounds, taken, edited)
}

func testDelete(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	mustCreate(t, s, simple("t", "d"))
	mustCreate(t, s, simple("t", "keep"))
	if err := s.Delete(ctx, "t", "d"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantGone(t, s, "t", "d")
	wantErr(t, "second Delete", s.Delete(ctx, "t", "d"), pool.ErrNotFound)
	wantErr(t, "Delete of an unknown id", s.Delete(ctx, "t", "never"), pool.ErrNotFound)
	mustGet(t, s, "t", "keep")
	list, err := s.List(ctx, "t")
	if err != nil || !slices.Equal(ids(list), []string{"t/keep"}) {
		t.Errorf("after Delete, List = %v, %v; want [t/keep]", ids(list), err)
	}
}

func testCap(t *testing.T, newStore NewStore) {
	const limit = 3
	s := newStore(t, limit, time.Hour)
	ctx := context.Background()

	// An entry that has already expired does not count.
	old := simple("t", "expired")
	old.ExpiresAt = time.Now().Add(-time.Minute)
	mustCreate(t, s, old)
	for i := range limit {
		mustCreate(t, s, simple("t", fmt.Sprint("e", i)))
	}
	wantErr(t, "Create past the cap", s.Create(ctx, simple("t", "over")), pool.ErrTenantFull)
	wantGone(t, s, "t", "over")
	expired := simple("t", "expired-too")
	expired.ExpiresAt = time.Now().Add(-time.Second)
	wantErr(t, "Create of an expired entry past the cap", s.Create(ctx, expired), pool.ErrTenantFull)

	// Another tenant has its own cap.
	for i := range limit {
		mustCreate(t, s, simple("u", fmt.Sprint("e", i)))
	}
	wantErr(t, "Create past the other tenant's cap", s.Create(ctx, simple("u", "over")), pool.ErrTenantFull)

	// Updates do not count.
	e := mustGet(t, s, "t", "e0")
	e.Paused = true
	if err := s.Update(ctx, e); err != nil {
		t.Errorf("Update at the cap: %v", err)
	}

	// Take and Delete make room.
	if _, err := s.Take(ctx, "t", "e0"); err != nil {
		t.Fatalf("Take: %v", err)
	}
	mustCreate(t, s, simple("t", "after-take"))
	wantErr(t, "Create past the cap again", s.Create(ctx, simple("t", "over")), pool.ErrTenantFull)
	if err := s.Delete(ctx, "t", "e1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	mustCreate(t, s, simple("t", "after-delete"))
	// The expired entry is still there, readable.
	if got := mustGet(t, s, "t", "expired"); !got.Expired(time.Now()) {
		t.Errorf("entry created expired reports Expired false")
	}
}

// sleepUntil sleeps until t has passed.
func sleepUntil(t time.Time) {
	time.Sleep(time.Until(t))
}

func testExpiredReadable(t *testing.T, newStore NewStore) {
	s := newStore(t, 1, time.Hour)
	ctx := context.Background()
	e := simple("t", "soon")
	e.ExpiresAt = time.Now().Add(300 * time.Millisecond)
	mustCreate(t, s, e)
	if now := time.Now(); now.Before(e.ExpiresAt) {
		if got := mustGet(t, s, "t", "soon"); got.Expired(now) {
			t.Errorf("Expired(%v) = true before ExpiresAt %v", now, got.ExpiresAt)
		}
	}
	err := s.Create(ctx, simple("t", "next"))
	if time.Now().After(e.ExpiresAt) {
		// The call may have seen the entry expired: nothing to conclude.
		t.Skip("the machine is too slow for this test: a Create took until past ExpiresAt")
	}
	wantErr(t, "Create at the cap of 1", err, pool.ErrTenantFull)

	sleepUntil(e.ExpiresAt.Add(10 * time.Millisecond))
	got := mustGet(t, s, "t", "soon")
	if !got.Expired(time.Now()) {
		t.Errorf("after ExpiresAt, Expired = false")
	}
	list, err := s.List(ctx, "t")
	if err != nil || !slices.Equal(ids(list), []string{"t/soon"}) {
		t.Errorf("List after expiry = %v, %v; want the expired entry", ids(list), err)
	}
	// It no longer counts toward the cap.
	mustCreate(t, s, simple("t", "next"))
	// And can still be taken, once.
	if _, err := s.Take(ctx, "t", "soon"); err != nil {
		t.Errorf("Take of an expired entry within retention: %v", err)
	}
}

func testRetentionEnds(t *testing.T, newStore NewStore) {
	const retention = 300 * time.Millisecond
	s := newStore(t, 0, retention)
	ctx := context.Background()
	e := simple("t", "short")
	e.ExpiresAt = time.Now().Add(100 * time.Millisecond)
	mustCreate(t, s, e)
	mustCreate(t, s, simple("t", "long"))
	other := simple("t", "short-other")
	other.ExpiresAt = e.ExpiresAt
	mustCreate(t, s, other)
	third := simple("t", "short-third")
	third.ExpiresAt = e.ExpiresAt
	mustCreate(t, s, third)

	sleepUntil(e.ExpiresAt.Add(retention + 100*time.Millisecond))
	wantGone(t, s, "t", "short")
	_, err := s.Take(ctx, "t", "short-other")
	wantErr(t, "Take after retention", err, pool.ErrNotFound)
	_, err = s.TakeRevision(ctx, "t", "short-third", third.Revision)
	wantErr(t, "TakeRevision after retention", err, pool.ErrNotFound)
	wantErr(t, "Delete after retention", s.Delete(ctx, "t", "short-other"), pool.ErrNotFound)
	list, err := s.List(ctx, "t")
	if err != nil || !slices.Equal(ids(list), []string{"t/long"}) {
		t.Errorf("List after retention = %v, %v; want [t/long]", ids(list), err)
	}
	stale := e.Clone()
	wantErr(t, "Update after retention", s.Update(ctx, stale), pool.ErrNotFound)
	// The id can be used again.
	again := simple("t", "short")
	mustCreate(t, s, again)
	if got := mustGet(t, s, "t", "short"); got.Revision != 1 {
		t.Errorf("recreated entry has Revision %d, want 1", got.Revision)
	}
}

func testCopies(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx := context.Background()
	e := NewEntry("t", "c")
	mustCreate(t, s, e)
	want := e.Clone()

	scribble := func(x *pool.Entry) {
		x.AgentName = "changed"
		x.Fields[2] = 'X'
		x.State[2] = 'X'
		x.Missing[0] = "changed"
		x.Problems[0] = "changed"
		x.Approval.ActionSummary = "changed"
		x.Approval.Details["to"] = "changed"
		x.Approval.Options[0] = "changed"
	}
	scribble(e) // the caller's entry after Create
	mustSame(t, "Get after changing the created entry", want, mustGet(t, s, "t", "c"))
	scribble(mustGet(t, s, "t", "c"))
	mustSame(t, "Get after changing a returned entry", want, mustGet(t, s, "t", "c"))
	list, err := s.List(ctx, "t")
	if err != nil || len(list) != 1 {
		t.Fatalf("List = %v, %v", ids(list), err)
	}
	scribble(list[0])
	mustSame(t, "Get after changing a listed entry", want, mustGet(t, s, "t", "c"))

	u := mustGet(t, s, "t", "c")
	if err := s.Update(ctx, u); err != nil {
		t.Fatalf("Update: %v", err)
	}
	want = u.Clone()
	scribble(u) // the caller's entry after Update
	mustSame(t, "Get after changing the updated entry", want, mustGet(t, s, "t", "c"))
}

func testCancelled(t *testing.T, newStore NewStore) {
	s := newStore(t, 0, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mustCreate(t, s, simple("t", "there"))

	wantErr(t, "Create", s.Create(ctx, simple("t", "new")), context.Canceled)
	wantGone(t, s, "t", "new")
	u := mustGet(t, s, "t", "there")
	u.Paused = true
	wantErr(t, "Update", s.Update(ctx, u), context.Canceled)
	_, err := s.Get(ctx, "t", "there")
	wantErr(t, "Get", err, context.Canceled)
	_, err = s.List(ctx, "t")
	wantErr(t, "List", err, context.Canceled)
	_, err = s.Take(ctx, "t", "there")
	wantErr(t, "Take", err, context.Canceled)
	_, err = s.TakeRevision(ctx, "t", "there", 1)
	wantErr(t, "TakeRevision", err, context.Canceled)
	wantErr(t, "Delete", s.Delete(ctx, "t", "there"), context.Canceled)
	if got := mustGet(t, s, "t", "there"); got.Paused || got.Revision != 1 {
		t.Errorf("calls with a cancelled context changed the entry: Paused %v, Revision %d", got.Paused, got.Revision)
	}
}

// RunLocker checks that the lockers newLocker makes behave as
// [pool.Locker] documents. Each check is a parallel subtest with a locker
// of its own; a locker that polls should poll often (every few
// milliseconds) to keep the suite fast.
func RunLocker(t *testing.T, newLocker NewLocker) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, newLocker NewLocker)
	}{
		{"MutualExclusion", testExclusion},
		{"KeysIndependent", testKeys},
		{"WaiterGetsLock", testWaiter},
		{"CancelWhileWaiting", testCancelWaiting},
		{"EndedContext", testEndedContext},
		{"ReleaseIdempotent", testReleaseTwice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newLocker)
		})
	}
}

// guard is how long past its context's end a Lock, or a release, may
// take before the suite calls it stuck.
const guard = 5 * time.Second

// lockGuarded calls l.Lock and fails the test if it does not return
// within guard after ctx ends (a Lock that ignores its context).
func lockGuarded(t *testing.T, ctx context.Context, l pool.Locker, key string) (func(), error) {
	t.Helper()
	type result struct {
		release func()
		err     error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Lock(ctx, key)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.release, res.err
	case <-ctx.Done():
	}
	select {
	case res := <-done:
		return res.release, res.err
	case <-time.After(guard):
		t.Fatalf("Lock(%q) still waiting %v after its context ended", key, guard)
		return nil, nil
	}
}

// unlock calls release and fails the test if it blocks.
func unlock(t *testing.T, release func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		release()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatalf("release blocked for %v", guard)
	}
}

// lockWithin locks key, failing the test if that takes longer than d.
func lockWithin(t *testing.T, l pool.Locker, key string, d time.Duration) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	release, err := lockGuarded(t, ctx, l, key)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	if release == nil {
		t.Fatalf("Lock(%q) returned a nil release and no error", key)
	}
	return func() { unlock(t, release) }
}

// wantBlocked checks that key cannot be locked within d.
func wantBlocked(t *testing.T, l pool.Locker, key string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	release, err := lockGuarded(t, ctx, l, key)
	if err == nil {
		unlock(t, release)
		t.Errorf("Lock(%q) succeeded while another holder has it", key)
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock(%q) with an ending context: %v, want context.DeadlineExceeded", key, err)
	}
}

func testExclusion(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	const workers, rounds = 6, 5
	var inside, overlaps atomic.Int32
	count := 0 // guarded by the lock only: the race detector sees a broken one
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				release, err := l.Lock(ctx, "shared")
				cancel()
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				count++
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if overlaps.Load() > 0 {
		t.Errorf("%d times two goroutines held the same key at once", overlaps.Load())
	}
	if count != workers*rounds {
		t.Errorf("count = %d, want %d", count, workers*rounds)
	}
}

func testKeys(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	ra := lockWithin(t, l, "key-a", 5*time.Second)
	defer ra()
	rb := lockWithin(t, l, "key-b", 2*time.Second) // a held key does not block another
	defer rb()
	wantBlocked(t, l, "key-a", 100*time.Millisecond)
	wantBlocked(t, l, "key-b", 100*time.Millisecond)
}

func testWaiter(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	release := lockWithin(t, l, "k", 5*time.Second)
	got := make(chan error, 1)
	var holding atomic.Bool
	holding.Store(true)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := l.Lock(ctx, "k")
		if err == nil {
			if holding.Load() {
				err = errors.New("waiter got the key while the first holder still had it")
			}
			r()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	holding.Store(false)
	release()
	if err := <-got; err != nil {
		t.Errorf("waiter: %v", err)
	}
}

func testCancelWaiting(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	release := lockWithin(t, l, "k", 5*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		r, err := l.Lock(ctx, "k")
		if err == nil {
			r()
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		wantErr(t, "Lock cancelled while waiting", err, context.Canceled)
	case <-time.After(guard):
		t.Fatalf("Lock still waiting %v after its context was cancelled", guard)
	}
	wantBlocked(t, l, "k", 50*time.Millisecond)

	// The cancelled waiter took nothing: after release the key is free.
	release()
	lockWithin(t, l, "k", 2*time.Second)()
}

func testEndedContext(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release, err := lockGuarded(t, ctx, l, "free")
	if err == nil {
		unlock(t, release)
	}
	wantErr(t, "Lock of a free key with a cancelled context", err, context.Canceled)
	lockWithin(t, l, "free", 2*time.Second)() // and it took nothing
}

func testReleaseTwice(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	first := lockWithin(t, l, "k", 2*time.Second)
	first()
	first()
	second := lockWithin(t, l, "k", 2*time.Second)
	first() // a late release must not free the second holder's lock
	wantBlocked(t, l, "k", 150*time.Millisecond)
	second()
	second()
	lockWithin(t, l, "k", 2*time.Second)()
}
