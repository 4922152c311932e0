package pooltest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/pool"
)

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
