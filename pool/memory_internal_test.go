package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
)

func entry(tenantID, id string, expires time.Time) *Entry {
	return &Entry{ID: id, TenantID: tenantID, AgentName: "a", Status: StatusWaitingForInput, ExpiresAt: expires}
}

// TestMemoryDefaults: the zero MemoryConfig means the defaults (a
// negative setting is refused: see TestNewMemoryRejectsNegative).
func TestMemoryDefaults(t *testing.T) {
	m := newMem(t, MemoryConfig{})
	if m.max != DefaultMaxPerTenant || m.retention != DefaultRetention || m.now == nil {
		t.Errorf("NewMemory: max %d, retention %v; want %d, %v", m.max, m.retention, DefaultMaxPerTenant, DefaultRetention)
	}
}

// newMem returns a Memory configured by cfg, failing the test when
// NewMemory refuses cfg.
func newMem(t testing.TB, cfg MemoryConfig) *Memory {
	t.Helper()
	m, err := NewMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMemoryForgets: entries of tenants nobody uses again are dropped by
// the periodic sweep, and emptied tenants leave no map behind.
func TestMemoryForgets(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newMem(t, MemoryConfig{Retention: time.Minute, Clock: clock})
	for i := range 10 {
		if err := m.Create(ctx, entry(fmt.Sprint("tenant", i), "e", clock.Now().Add(time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Create(ctx, entry("kept", "e", clock.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2*time.Minute + time.Second)
	if err := m.Create(ctx, entry("new", "e", clock.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if len(m.tenants) != 2 {
		t.Errorf("after the sweep %d tenants are held, want 2 (kept, new)", len(m.tenants))
	}
	if _, err := m.Take(ctx, "kept", "e"); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "new", "e"); err != nil {
		t.Fatal(err)
	}
	if len(m.tenants) != 0 {
		t.Errorf("after removing every entry %d tenants are held, want 0", len(m.tenants))
	}
}

// TestMemoryRetentionClock: with a fake clock, an entry is readable and
// expired until ExpiresAt+Retention, then gone.
func TestMemoryRetentionClock(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := newMem(t, MemoryConfig{Retention: time.Hour, MaxPerTenant: 1, Clock: clock})
	if err := m.Create(ctx, entry("t", "e", clock.Now().Add(time.Minute))); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	got, err := m.Get(ctx, "t", "e")
	if err != nil || !got.Expired(clock.Now()) {
		t.Fatalf("at ExpiresAt: %v, %v; want the entry, expired", got, err)
	}
	if err := m.Create(ctx, entry("t", "f", clock.Now().Add(time.Minute))); err != nil {
		t.Fatalf("an expired entry counted toward the cap: %v", err)
	}
	clock.Advance(time.Hour - time.Millisecond)
	if _, err := m.Get(ctx, "t", "e"); err != nil {
		t.Fatalf("just before retention ends: %v", err)
	}
	clock.Advance(time.Millisecond)
	if _, err := m.Get(ctx, "t", "e"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("when retention ends: %v, want ErrNotFound", err)
	}
}

// TestMemoryLockerForgets: keys nobody holds or waits for take no memory,
// including after a waiter gave up.
func TestMemoryLockerForgets(t *testing.T) {
	l := NewMemoryLocker()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			for range 10 {
				release, err := l.Lock(context.Background(), fmt.Sprint("k", i%4))
				if err != nil {
					t.Error(err)
					return
				}
				release()
			}
		})
	}
	wg.Wait()
	release, err := l.Lock(context.Background(), "held")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "held"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting Lock: %v", err)
	}
	release()
	release()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) != 0 {
		t.Errorf("%d keys still held in memory, want 0", len(l.keys))
	}
}
