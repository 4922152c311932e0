package trigger_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests do not depend on the machine's zone files

	"github.com/valetkit/valet/trigger"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestCronSequences follows each schedule from a start, time after time,
// across daylight-saving changes.
func TestCronSequences(t *testing.T) {
	tests := []struct {
		name, cron, zone, after string
		want                    []string // consecutive times, with the zone's offset
	}{
		{
			name: "Paris spring gap fires at the end of the gap",
			cron: "30 2 * * *", zone: "Europe/Paris", after: "2026-03-28T12:00:00Z",
			want: []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"},
		},
		{
			name: "Paris autumn repeat fires once, at the first pass",
			cron: "30 2 * * *", zone: "Europe/Paris", after: "2026-10-24T12:00:00Z",
			want: []string{"2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"},
		},
		{
			name: "Paris every quarter hour in the gap collapses into one run",
			cron: "*/15 2 * * *", zone: "Europe/Paris", after: "2026-03-28T23:00:00Z",
			want: []string{"2026-03-29T03:00:00+02:00", "2026-03-30T02:00:00+02:00", "2026-03-30T02:15:00+02:00"},
		},
		{
			name: "Paris hourly over the repeat skips the second pass",
			cron: "0 * * * *", zone: "Europe/Paris", after: "2026-10-24T23:30:00Z",
			want: []string{
				"2026-10-25T02:00:00+02:00", // 00:00 UTC
				"2026-10-25T03:00:00+01:00", // 02:00 UTC: 02:00 CET is the second pass, skipped
				"2026-10-25T04:00:00+01:00",
			},
		},
		{
			name: "New York spring gap fires at 03:00 EDT",
			cron: "30 2 * * *", zone: "America/New_York", after: "2026-03-08T00:00:00Z",
			want: []string{"2026-03-08T03:00:00-04:00", "2026-03-09T02:30:00-04:00"},
		},
		{
			name: "New York autumn repeat fires once",
			cron: "30 1 * * *", zone: "America/New_York", after: "2026-10-31T12:00:00Z",
			want: []string{"2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		},
		{
			name: "New York half-hourly over the repeat",
			cron: "*/30 * * * *", zone: "America/New_York", after: "2026-11-01T04:00:00Z",
			want: []string{
				"2026-11-01T00:30:00-04:00", "2026-11-01T01:00:00-04:00", "2026-11-01T01:30:00-04:00",
				"2026-11-01T02:00:00-05:00", "2026-11-01T02:30:00-05:00",
			},
		},
		{
			name: "from inside the second pass, the first-pass time is not repeated",
			cron: "45 1 * * *", zone: "America/New_York", after: "2026-11-01T06:10:00Z", // 01:10 EST
			want: []string{"2026-11-02T01:45:00-05:00"},
		},
		{
			name: "from inside the first pass, a later minute of it still fires",
			cron: "45 1 * * *", zone: "America/New_York", after: "2026-11-01T05:10:00Z", // 01:10 EDT
			want: []string{"2026-11-01T01:45:00-04:00", "2026-11-02T01:45:00-05:00"},
		},
		{
			name: "Lord Howe moves by 30 minutes",
			cron: "15 2 * * *", zone: "Australia/Lord_Howe", after: "2026-10-03T12:00:00Z",
			want: []string{"2026-10-04T02:30:00+11:00", "2026-10-05T02:15:00+11:00"},
		},
		{
			name: "Sao Paulo 2018: midnight did not exist",
			cron: "0 0 * * *", zone: "America/Sao_Paulo", after: "2018-11-03T12:00:00Z",
			want: []string{"2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"},
		},
		{
			name: "Apia 2011: 30 December did not exist",
			cron: "0 12 * * *", zone: "Pacific/Apia", after: "2011-12-29T12:00:00-10:00",
			want: []string{"2011-12-31T00:00:00+14:00", "2011-12-31T12:00:00+14:00"},
		},
		{
			name: "UTC by default",
			cron: "0 9 * * 1-5", zone: "", after: "2026-05-01T09:00:00Z", // a Friday, at the time itself
			want: []string{"2026-05-04T09:00:00Z", "2026-05-05T09:00:00Z"},
		},
		{
			name: "leap day finds the next leap year",
			cron: "0 9 29 2 *", zone: "Europe/Paris", after: "2026-01-01T00:00:00Z",
			want: []string{"2028-02-29T09:00:00+01:00", "2032-02-29T09:00:00+01:00"},
		},
		{
			name: "leap day across a century that is not leap",
			cron: "0 9 29 2 *", zone: "UTC", after: "2096-03-01T00:00:00Z",
			want: []string{"2104-02-29T09:00:00Z"},
		},
		{
			name: "day of month and day of week both restricted: either matches",
			cron: "0 0 13 * FRI", zone: "UTC", after: "2026-02-01T00:00:00Z",
			want: []string{"2026-02-06T00:00:00Z", "2026-02-13T00:00:00Z", "2026-02-20T00:00:00Z", "2026-02-27T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-13T00:00:00Z"},
		},
		{
			name: "a star day of month: the day of week alone restricts",
			cron: "0 0 * * 1", zone: "UTC", after: "2026-02-01T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"},
		},
		{
			name: "*/1 is a star for robfig: Mondays only",
			cron: "0 0 */1 * 1", zone: "UTC", after: "2026-02-01T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"},
		},
		{
			name: "? is a star too",
			cron: "0 0 ? * 1", zone: "UTC", after: "2026-02-01T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z", "2026-02-09T00:00:00Z"},
		},
		{
			name: "*/2 is not a star: odd days or Mondays",
			cron: "0 0 */2 * 1", zone: "UTC", after: "2026-02-01T00:00:00Z",
			want: []string{"2026-02-02T00:00:00Z", "2026-02-03T00:00:00Z", "2026-02-05T00:00:00Z"},
		},
		{
			name: "a star day of week: the day of month alone restricts",
			cron: "0 0 31 * *", zone: "UTC", after: "2026-01-31T00:00:00Z",
			want: []string{"2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"},
		},
		{
			name: "names and ranges",
			cron: "5 8-9 * JAN-FEB SAT,SUN", zone: "Asia/Kolkata", after: "2026-12-31T00:00:00Z",
			want: []string{"2027-01-02T08:05:00+05:30", "2027-01-02T09:05:00+05:30", "2027-01-03T08:05:00+05:30"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := trigger.Schedule{Cron: tt.cron, Zone: tt.zone}
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			after := mustTime(t, tt.after)
			for i, w := range tt.want {
				got, ok := s.Next(after)
				want := mustTime(t, w)
				if !ok || !got.Equal(want) {
					t.Fatalf("Next #%d after %s = %s, %v; want %s", i+1, after, got, ok, want)
				}
				if _, off := got.Zone(); func() int { _, o := want.Zone(); return o }() != off {
					t.Errorf("Next #%d = %s: not in the schedule's zone (want offset of %s)", i+1, got, w)
				}
				after = got
			}
		})
	}
}

func TestCheckRejects(t *testing.T) {
	at := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	tests := map[string]trigger.Schedule{
		"zero":                    {},
		"cron and every":          {Cron: "* * * * *", Every: time.Hour},
		"every and at":            {Every: time.Hour, At: at},
		"zone without cron":       {Every: time.Hour, Zone: "UTC"},
		"start without every":     {At: at, Start: at},
		"every under a second":    {Every: 999 * time.Millisecond},
		"negative every":          {Every: -time.Hour},
		"four fields":             {Cron: "* * * *"},
		"six fields":              {Cron: "0 * * * * *"},
		"blank":                   {Cron: "   "},
		"minute 60":               {Cron: "60 * * * *"},
		"hour 24":                 {Cron: "0 24 * * *"},
		"day 0":                   {Cron: "0 0 0 * *"},
		"month 13":                {Cron: "0 0 * 13 *"},
		"weekday 7":               {Cron: "0 0 * * 7"},
		"step 0":                  {Cron: "*/0 * * * *"},
		"reversed range":          {Cron: "5-1 * * * *"},
		"letters":                 {Cron: "a b c d e"},
		"descriptor":              {Cron: "@daily"},
		"every descriptor":        {Cron: "@every 1h"},
		"TZ prefix":               {Cron: "TZ=Europe/Paris 0 9 * * *"},
		"CRON_TZ prefix":          {Cron: "CRON_TZ=UTC 0 9 * * *"},
		"TZ prefix alone":         {Cron: "TZ=Europe/Paris"}, // panics inside robfig/cron v3.0.1
		"a field of commas":       {Cron: "0 0 1 , 0"},
		"30 February":             {Cron: "0 0 30 2 *"},
		"31st of 30-day months":   {Cron: "0 0 31 4,6,9,11 *"},
		"unknown zone":            {Cron: "0 9 * * *", Zone: "Mars/Olympus_Mons"},
		"Local zone":              {Cron: "0 9 * * *", Zone: "Local"},
		"path as zone":            {Cron: "0 9 * * *", Zone: "../../etc/passwd"},
		"very long":               {Cron: strings.Repeat("1,", 200) + "1 * * * *"},
		"descriptor with a space": {Cron: " @hourly"},
	}
	for name, s := range tests {
		t.Run(name, func(t *testing.T) {
			err := s.Check()
			if !errors.Is(err, trigger.ErrInvalid) {
				t.Fatalf("Check(%v) = %v, want ErrInvalid", s, err)
			}
			if got, ok := s.Next(at); ok {
				t.Errorf("Next of an invalid schedule = %s, true", got)
			}
			if _, ok, next := s.Due(at, at.Add(time.Hour), trigger.CatchUpOnce, 0); ok || !next.IsZero() {
				t.Errorf("Due of an invalid schedule = %v, %s", ok, next)
			}
		})
	}
}

func TestCheckAccepts(t *testing.T) {
	for _, s := range []trigger.Schedule{
		{Cron: "0 0 29 2 *"},
		{Cron: "0 0 31 * *"},
		{Cron: "0 0 30 2 MON"}, // both restricted: Mondays in February
		{Cron: "0 0 * * *", Zone: "UTC"},
		{Cron: "  0 9 * * *  ", Zone: "America/New_York"},
		{Every: time.Second},
		{Every: time.Hour, Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if err := s.Check(); err != nil {
			t.Errorf("Check(%v) = %v", s, err)
		}
	}
}

func TestEvery(t *testing.T) {
	start := mustTime(t, "2026-01-01T00:00:10Z")
	s := trigger.Schedule{Every: 90 * time.Second, Start: start}
	tests := []struct{ after, want string }{
		{"2025-06-01T00:00:00Z", "2026-01-01T00:00:10Z"}, // before the start: the start
		{"2026-01-01T00:00:10Z", "2026-01-01T00:01:40Z"}, // at a run time: the next one
		{"2026-01-01T00:01:39Z", "2026-01-01T00:01:40Z"},
		{"2026-01-01T01:00:00Z", "2026-01-01T01:00:10Z"}, // 3590s after the start: the 40th run, 3600s
		{"2026-01-01T01:00:10Z", "2026-01-01T01:01:40Z"},
	}
	for _, tt := range tests {
		got, ok := s.Next(mustTime(t, tt.after))
		if want := mustTime(t, tt.want); !ok || !got.Equal(want) {
			t.Errorf("Next(%s) = %s, %v; want %s", tt.after, got, ok, want)
		}
	}

	// Far beyond a Duration (292 years) from the start: the same as from
	// a later start in phase with it.
	far := mustTime(t, "2400-01-01T00:00:00Z")
	later := trigger.Schedule{Every: s.Every, Start: start.Add(100_000_000 * s.Every)} // 285 years on
	if got, ok := s.Next(far); !ok || !got.After(far) || got.Sub(far) > s.Every {
		t.Errorf("Next(%s) = %s, %v: not within one interval", far, got, ok)
	} else if want, _ := later.Next(far); !got.Equal(want) {
		t.Errorf("Next(%s) = %s, want %s (from the later start)", far, got, want)
	}

	// Default anchor: the Unix epoch, so an hourly schedule runs on the
	// hour, UTC: at half past in a zone 5h30 ahead.
	hourly := trigger.Schedule{Every: time.Hour}
	after := time.Date(2026, 7, 14, 13, 37, 1, 5, time.FixedZone("X", 5*3600+1800))
	got, ok := hourly.Next(after)
	if !ok || !got.Equal(time.Date(2026, 7, 14, 14, 30, 0, 0, time.FixedZone("X", 5*3600+1800))) {
		t.Errorf("hourly Next(%s) = %s, %v", after, got, ok)
	}

	// Sub-second phase and a start before the epoch, cross-checked on
	// whole seconds of a prime interval.
	odd := trigger.Schedule{Every: 7919 * time.Millisecond, Start: time.Date(1, 1, 1, 0, 0, 0, 3, time.UTC)}
	prev, _ := odd.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for range 100 {
		next, ok := odd.Next(prev)
		if !ok || next.Sub(prev) != 7919*time.Millisecond {
			t.Fatalf("Next(%s) = %s: not one interval later", prev, next)
		}
		if mid, _ := odd.Next(prev.Add(time.Second)); !mid.Equal(next) {
			t.Fatalf("Next(%s + 1s) = %s, want %s", prev, mid, next)
		}
		prev = next
	}
}

func TestAt(t *testing.T) {
	at := mustTime(t, "2026-05-01T08:00:00+02:00")
	s := trigger.Schedule{At: at}
	if got, ok := s.Next(at.Add(-time.Nanosecond)); !ok || !got.Equal(at) {
		t.Errorf("Next just before = %s, %v", got, ok)
	}
	if got, ok := s.Next(at); ok {
		t.Errorf("Next at the time itself = %s, true; want none", got)
	}
	if got, ok := s.Next(at.Add(time.Hour)); ok {
		t.Errorf("Next after = %s, true; want none", got)
	}
}

func TestString(t *testing.T) {
	for s, want := range map[trigger.Schedule]string{
		{Cron: "0 9 * * *"}:                               "cron 0 9 * * * UTC",
		{Cron: "0 9 * * *", Zone: "Asia/Tokyo"}:           "cron 0 9 * * * Asia/Tokyo",
		{Every: time.Hour}:                                "every 1h0m0s from 1970-01-01T00:00:00Z",
		{At: time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)}: "at 2026-05-01T08:00:00Z",
		{}: "invalid schedule {Cron: Zone: Every:0s Start:0001-01-01 00:00:00 +0000 UTC At:0001-01-01 00:00:00 +0000 UTC}",
	} {
		if got := s.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
