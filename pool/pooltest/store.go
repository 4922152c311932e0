package pooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/pool"
)

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
		"bad SubAgent":  func(e *pool.Entry) { e.SubAgent = json.RawMessage(`[{"v":`) },
		// One ID limit across valet (memory.MaxIDLen): an entry that
		// memory would refuse is not parked.
		"long TenantID":       func(e *pool.Entry) { e.TenantID = strings.Repeat("t", pool.MaxIDLen+1) },
		"long ConversationID": func(e *pool.Entry) { e.ConversationID = strings.Repeat("c", pool.MaxIDLen+1) },
		"long TaskID":         func(e *pool.Entry) { e.TaskID = strings.Repeat("k", pool.MaxIDLen+1) },
		"TenantID with NUL":   func(e *pool.Entry) { e.TenantID = "t\x00" },
		// encoding/json would turn the bad bytes into U+FFFD: a store that
		// keeps entries as JSON would read back an entry that is not the
		// one it stored (and call it corrupt).
		"ID not UTF-8": func(e *pool.Entry) { e.ID = "bad\xff" },
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
