package clocktest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/clock/clocktest"
)

var start = time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)

func fired(tm clock.Timer) (time.Time, bool) {
	select {
	case v := <-tm.C():
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestClockTimers(t *testing.T) {
	c := clocktest.New(start)
	a := c.NewTimer(time.Hour)
	b := c.NewTimer(2 * time.Hour)
	stopped := c.NewTimer(30 * time.Minute)
	now := c.NewTimer(0)
	if v, ok := fired(now); !ok || !v.Equal(start) {
		t.Fatalf("a timer of 0 did not fire at once: %s, %v", v, ok)
	}
	if c.Timers() != 3 {
		t.Fatalf("Timers() = %d, want 3", c.Timers())
	}
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true, then false")
	}
	c.Advance(59 * time.Minute)
	if _, ok := fired(a); ok {
		t.Fatal("fired before its deadline")
	}
	c.Advance(time.Minute)
	if v, ok := fired(a); !ok || !v.Equal(start.Add(time.Hour)) {
		t.Fatalf("at its deadline: %s, %v", v, ok)
	}
	if a.Stop() {
		t.Error("Stop after firing reported true")
	}
	c.Advance(3 * time.Hour)
	if v, ok := fired(b); !ok || !v.Equal(start.Add(4*time.Hour)) || !c.Now().Equal(v) {
		t.Fatalf("advanced past its deadline: %s, %v (now %s)", v, ok, c.Now())
	}
	if _, ok := fired(stopped); ok {
		t.Error("a stopped timer fired")
	}
	if c.Timers() != 0 {
		t.Errorf("Timers() = %d after all fired", c.Timers())
	}
	c.Advance(-time.Hour)
	if !c.Now().Equal(start.Add(4 * time.Hour)) {
		t.Errorf("a negative Advance moved the clock to %s", c.Now())
	}
}

// TestClockScheduler runs a small scheduler loop against the fake clock
// from another goroutine: a week of a daily schedule, without sleeping.
func TestClockScheduler(t *testing.T) {
	c := clocktest.New(start)
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no tz database:", err)
	}
	// next09 is the first 09:00 in Paris after t.
	next09 := func(t time.Time) time.Time {
		l := t.In(paris)
		n := time.Date(l.Year(), l.Month(), l.Day(), 9, 0, 0, 0, paris)
		if !n.After(t) {
			n = time.Date(l.Year(), l.Month(), l.Day()+1, 9, 0, 0, 0, paris)
		}
		return n
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := make(chan time.Time, 16)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		next := next09(c.Now())
		for {
			if now := c.Now(); !now.Before(next) {
				runs <- next
				next = next09(now)
			}
			tm := c.NewTimer(next.Sub(c.Now()))
			select {
			case <-tm.C():
			case <-ctx.Done():
				tm.Stop()
				return
			}
		}
	}()
	for day := range 7 {
		if err := c.AwaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		c.Advance(24 * time.Hour)
		got := <-runs
		want := time.Date(2026, 3, 29+day, 9, 0, 0, 0, time.UTC).Add(-2 * time.Hour) // 09:00 CEST
		if !got.Equal(want) {
			t.Fatalf("day %d: run at %s, want %s", day, got, want)
		}
	}
	cancel()
	wg.Wait()

	short, stop := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer stop()
	if err := c.AwaitTimers(short, 1); err != context.DeadlineExceeded {
		t.Errorf("AwaitTimers with no timer = %v, want the ctx's error", err)
	}
}

func TestClockZeroValueAndRace(t *testing.T) {
	var c clocktest.Clock
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				tm := c.NewTimer(time.Second)
				c.Advance(time.Millisecond)
				tm.Stop()
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := c.Now(); !got.Equal(time.Time{}.Add(800 * time.Millisecond)) {
		t.Errorf("Now() = %s after 800 advances of 1ms", got)
	}
}

func TestClockSet(t *testing.T) {
	c := clocktest.New(start)
	tm := c.NewTimer(time.Hour)
	c.Set(start.Add(30 * time.Minute))
	if _, ok := fired(tm); ok {
		t.Fatal("fired before its deadline")
	}
	eight := start.Add(20 * time.Hour)
	c.Set(eight)
	if v, ok := fired(tm); !ok || !v.Equal(eight) || !c.Now().Equal(eight) {
		t.Fatalf("Set past its deadline: %s, %v (now %s)", v, ok, c.Now())
	}
	c.Set(start)
	if !c.Now().Equal(eight) {
		t.Errorf("Set to the past moved the clock back to %s", c.Now())
	}
}
