package trigger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

func TestDue(t *testing.T) {
	daily := trigger.Schedule{Cron: "0 9 * * *", Zone: "Europe/Paris"}
	day := func(d, h, m int) time.Time {
		return time.Date(2026, 6, d, h, m, 0, 0, time.FixedZone("CEST", 2*3600))
	}
	tests := []struct {
		name      string
		s         trigger.Schedule
		last, now time.Time
		policy    trigger.MissedPolicy
		grace     time.Duration
		runAt     time.Time // zero: no run
		next      time.Time
	}{
		{"not yet", daily, day(1, 10, 0), day(2, 8, 59), trigger.CatchUpOnce, 0, time.Time{}, day(2, 9, 0)},
		{"on time", daily, day(1, 10, 0), day(2, 9, 0), trigger.CatchUpOnce, 0, day(2, 9, 0), day(3, 9, 0)},
		{"on time, skip", daily, day(1, 10, 0), day(2, 9, 0), trigger.Skip, 0, day(2, 9, 0), day(3, 9, 0)},
		{"late within the default grace, skip", daily, day(1, 10, 0), day(2, 9, 0).Add(59 * time.Second), trigger.Skip, 0, day(2, 9, 0), day(3, 9, 0)},
		{"late by the default grace, skip", daily, day(1, 10, 0), day(2, 9, 1), trigger.Skip, 0, time.Time{}, day(3, 9, 0)},
		{"late within a longer grace, skip", daily, day(1, 10, 0), day(2, 9, 30), trigger.Skip, time.Hour, day(2, 9, 0), day(3, 9, 0)},
		{"three days down, catch up once at the earliest", daily, day(1, 10, 0), day(5, 8, 0), trigger.CatchUpOnce, 0, day(2, 9, 0), day(5, 9, 0)},
		{"three days down, skip", daily, day(1, 10, 0), day(5, 8, 0), trigger.Skip, 0, time.Time{}, day(5, 9, 0)},
		{"down, then woken on time: skip runs the on-time one", daily, day(1, 10, 0), day(5, 9, 0), trigger.Skip, 0, day(5, 9, 0), day(6, 9, 0)},
		{"a time at last was handled already", daily, day(2, 9, 0), day(2, 9, 0), trigger.CatchUpOnce, 0, time.Time{}, day(3, 9, 0)},
		{
			"minutely, skip: the earliest within the grace", trigger.Schedule{Cron: "* * * * *"},
			day(1, 0, 0), day(1, 12, 0), trigger.Skip, 150 * time.Second, day(1, 11, 58), day(1, 12, 1),
		},
		{
			"one-time, missed, catch up", trigger.Schedule{At: day(2, 9, 0)},
			day(1, 10, 0), day(3, 0, 0), trigger.CatchUpOnce, 0, day(2, 9, 0), time.Time{},
		},
		{
			"one-time, missed, skip: finished without a run", trigger.Schedule{At: day(2, 9, 0)},
			day(1, 10, 0), day(3, 0, 0), trigger.Skip, 0, time.Time{}, time.Time{},
		},
		{
			"one-time, done", trigger.Schedule{At: day(2, 9, 0)},
			day(3, 0, 0), day(4, 0, 0), trigger.CatchUpOnce, 0, time.Time{}, time.Time{},
		},
		{
			"interval, catch up", trigger.Schedule{Every: time.Hour},
			day(1, 10, 0), day(1, 14, 30), trigger.CatchUpOnce, 0, day(1, 11, 0), day(1, 15, 0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runAt, ok, next := tt.s.Due(tt.last, tt.now, tt.policy, tt.grace)
			if ok != !tt.runAt.IsZero() || !runAt.Equal(tt.runAt) || !next.Equal(tt.next) {
				t.Fatalf("Due = %s, %v, %s; want %s, %v, %s", runAt, ok, next, tt.runAt, !tt.runAt.IsZero(), tt.next)
			}
		})
	}
}

// TestDueRunsEachTimeOnce drives a scheduler loop over a month with
// irregular wake-ups: every schedule time runs exactly once, at or after
// the time, when the scheduler never sleeps past the grace.
func TestDueRunsEachTimeOnce(t *testing.T) {
	s := trigger.Schedule{Cron: "*/20 1-3 * * *", Zone: "America/New_York"} // across both DST changes of 2026
	const step = 53 * time.Second                                           // under DefaultGrace
	for _, p := range []trigger.MissedPolicy{trigger.CatchUpOnce, trigger.Skip} {
		for _, window := range [][2]string{
			{"2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z"},
			{"2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z"},
		} {
			start, end := mustTime(t, window[0]), mustTime(t, window[1])
			last := start
			var runs []time.Time
			for now := start; now.Before(end); now = now.Add(step) {
				runAt, ok, next := s.Due(last, now, p, 0)
				if ok {
					if now.Before(runAt) || now.Sub(runAt) >= step {
						t.Fatalf("%s: run for %s at %s", p, runAt, now)
					}
					runs = append(runs, runAt)
				}
				if !next.After(now) {
					t.Fatalf("%s: next %s is not after now %s", p, next, now)
				}
				last = now
			}
			var want []time.Time
			for tm, ok := s.Next(start); ok && !tm.After(last); tm, ok = s.Next(tm) {
				want = append(want, tm)
			}
			if len(runs) != len(want) || len(want) < 20 {
				t.Fatalf("%s: %d runs, want %d", p, len(runs), len(want))
			}
			for i := range want {
				if !runs[i].Equal(want[i]) {
					t.Fatalf("%s: run %d at %s, want %s", p, i, runs[i], want[i])
				}
			}
		}
	}
}

func TestMissedPolicy(t *testing.T) {
	if trigger.MissedPolicy(0) != trigger.CatchUpOnce {
		t.Error("the zero MissedPolicy is not CatchUpOnce")
	}
	for p, want := range map[trigger.MissedPolicy]string{trigger.CatchUpOnce: "catch_up_once", trigger.Skip: "skip", 7: "MissedPolicy(7)"} {
		if p.String() != want {
			t.Errorf("String() = %q, want %q", p.String(), want)
		}
	}
	if err := trigger.Skip.Check(); err != nil {
		t.Error(err)
	}
	bad := trigger.MissedPolicy(-1)
	if err := bad.Check(); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("Check(-1) = %v", err)
	}
	s := trigger.Schedule{Every: time.Minute}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, ok, next := s.Due(now.Add(-time.Hour), now, bad, 0); ok || !next.IsZero() {
		t.Errorf("Due with a bad policy = %v, %s", ok, next)
	}
}
