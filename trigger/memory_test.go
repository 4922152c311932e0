package trigger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

func TestMemoryStore(t *testing.T) {
	triggertest.RunStore(t, func(t *testing.T) trigger.Store { return trigger.NewMemoryStore() })
}

func TestMemoryStoreZeroValue(t *testing.T) {
	triggertest.RunStore(t, func(t *testing.T) trigger.Store { return new(trigger.MemoryStore) })
}

func addRuns(t *testing.T, s trigger.Store, n int) {
	t.Helper()
	at := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		if err := s.AddRun(context.Background(), triggertest.NewRun("t1", "a", at.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestMemoryStoreRunBound(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		maxRuns, add, want int
	}{
		{0, trigger.DefaultMaxRuns + 25, trigger.DefaultMaxRuns},
		{0, trigger.DefaultMaxRuns - 1, trigger.DefaultMaxRuns - 1},
		{3, 10, 3},
		{3, 3, 3},
		{-5, trigger.DefaultMaxRuns + 1, trigger.DefaultMaxRuns},
	} {
		s := &trigger.MemoryStore{MaxRuns: tc.maxRuns}
		if err := s.Create(ctx, triggertest.NewTask("t1", "a")); err != nil {
			t.Fatal(err)
		}
		addRuns(t, s, tc.add)
		runs, err := s.Runs(ctx, "t1", "a", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != tc.want {
			t.Errorf("MaxRuns %d, %d added: kept %d, want %d", tc.maxRuns, tc.add, len(runs), tc.want)
		}
		newest := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(tc.add-1) * time.Minute)
		if runs[0].ID != trigger.RunID("a", newest) {
			t.Errorf("MaxRuns %d: newest kept is %s", tc.maxRuns, runs[0].ID)
		}
	}
}

func TestMemoryStoreClock(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC)
	clk := clocktest.New(t0)
	s := &trigger.MemoryStore{Clock: clk}
	task := triggertest.NewTask("t1", "a")
	if err := s.Create(ctx, task); err != nil {
		t.Fatal(err)
	}
	if !task.CreatedAt.Equal(t0) || !task.UpdatedAt.Equal(t0) {
		t.Fatalf("Create set CreatedAt %v, UpdatedAt %v; want the clock's %v", task.CreatedAt, task.UpdatedAt, t0)
	}
	clk.Advance(time.Hour)
	if err := s.Update(ctx, task); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "t1", "a")
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("after Update: CreatedAt %v, UpdatedAt %v; want %v and %v", got.CreatedAt, got.UpdatedAt, t0, t0.Add(time.Hour))
	}
}

func TestMemoryStoreDeleteLastTask(t *testing.T) {
	// Deleting a tenant's last task leaves the store usable for it.
	ctx := context.Background()
	s := trigger.NewMemoryStore()
	if err := s.Create(ctx, triggertest.NewTask("t1", "a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "t1", "a"); err != nil {
		t.Fatal(err)
	}
	if l, err := s.List(ctx, "t1"); err != nil || len(l) != 0 {
		t.Fatalf("List after deleting the last task: %d, %v", len(l), err)
	}
	if err := s.Create(ctx, triggertest.NewTask("t1", "b")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "t1", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "t1", "a"); !errors.Is(err, trigger.ErrNotFound) {
		t.Fatalf("deleted task: %v", err)
	}
}
