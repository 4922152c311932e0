package trigger_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// field is one random cron field: its text and the values it allows,
// worked out here without robfig/cron.
type field struct {
	text string
	set  map[int]bool
	star bool // written "*", "?" or "*/1"
}

func randomField(r *rand.Rand, lo, hi int, names []string) field {
	f := field{set: map[int]bool{}}
	span := func(a, b, step int) {
		for v := a; v <= b; v += step {
			f.set[v] = true
		}
	}
	name := func(v int) string {
		if names != nil && r.IntN(3) == 0 {
			return names[v-lo]
		}
		return fmt.Sprint(v)
	}
	switch r.IntN(8) {
	case 0, 1:
		f.text, f.star = "*", true
		span(lo, hi, 1)
	case 2:
		step := 1 + r.IntN(hi-lo+1)
		f.text, f.star = fmt.Sprintf("*/%d", step), step == 1
		span(lo, hi, step)
	case 3:
		v := lo + r.IntN(hi-lo+1)
		f.text = name(v)
		f.set[v] = true
	case 4:
		a := lo + r.IntN(hi-lo+1)
		b := a + r.IntN(hi-a+1)
		f.text = name(a) + "-" + name(b)
		span(a, b, 1)
	case 5:
		a := lo + r.IntN(hi-lo+1)
		b := a + r.IntN(hi-a+1)
		step := 1 + r.IntN(5)
		f.text = fmt.Sprintf("%d-%d/%d", a, b, step)
		span(a, b, step)
	case 6:
		var parts []string
		for range 1 + r.IntN(4) {
			v := lo + r.IntN(hi-lo+1)
			parts = append(parts, name(v))
			f.set[v] = true
		}
		f.text = strings.Join(parts, ",")
	case 7:
		if r.IntN(2) == 0 {
			f.text, f.star = "?", true
			span(lo, hi, 1)
		} else {
			a := lo + r.IntN(hi-lo+1)
			step := 1 + r.IntN(7)
			f.text = fmt.Sprintf("%d/%d", a, step)
			span(a, hi, step)
		}
	}
	return f
}

type expr struct{ minute, hour, dom, month, dow field }

func (e expr) String() string {
	return strings.Join([]string{e.minute.text, e.hour.text, e.dom.text, e.month.text, e.dow.text}, " ")
}

// matches applies the rules as robfig/cron documents them: with a star in
// day of month or day of week both must match, otherwise either.
func (e expr) matches(wall time.Time) bool {
	if !e.minute.set[wall.Minute()] || !e.hour.set[wall.Hour()] || !e.month.set[int(wall.Month())] {
		return false
	}
	dom, dow := e.dom.set[wall.Day()], e.dow.set[int(wall.Weekday())]
	if e.dom.star || e.dow.star {
		return dom && dow
	}
	return dom || dow
}

// naiveNext walks real minutes (instants) and reads the zone's wall clock
// at each: a wall minute fires the first time the clock shows it, or at
// the instant the clock jumps over it, and never again. It starts two
// days early to learn which wall minutes were already shown. It gives up
// after limit, returning false.
func naiveNext(e expr, loc *time.Location, after time.Time, limit time.Duration) (time.Time, bool) {
	wallOf := func(t time.Time) time.Time {
		l := t.In(loc)
		return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), 0, 0, time.UTC)
	}
	seen := map[time.Time]bool{}
	t := after.Add(-48 * time.Hour).Truncate(time.Minute)
	prev := wallOf(t)
	seen[prev] = true
	for t = t.Add(time.Minute); !t.After(after.Add(limit)); t = t.Add(time.Minute) {
		w := wallOf(t)
		fires := false
		for s := prev.Add(time.Minute); s.Before(w); s = s.Add(time.Minute) { // jumped over
			if !seen[s] {
				seen[s] = true
				fires = fires || e.matches(s)
			}
		}
		if !seen[w] {
			seen[w] = true
			fires = fires || e.matches(w)
		}
		if fires && t.After(after) {
			return t, true
		}
		prev = w
	}
	return time.Time{}, false
}

var crossZones = []string{
	"UTC", "Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata",
	"Asia/Kathmandu", "Pacific/Chatham", "America/St_Johns", "America/Sao_Paulo",
	"Australia/Sydney", "America/Santiago", "Africa/Casablanca", "Asia/Tehran",
	"Europe/London", "Pacific/Apia", "America/Havana", "Antarctica/Troll",
}

// TestCronCrossCheck compares Next with naiveNext for random expressions,
// zones and start times, most of them near a change of the zone's offset.
func TestCronCrossCheck(t *testing.T) {
	cases := 400
	if testing.Short() {
		cases = 60
	}
	r := rand.New(rand.NewPCG(1, 2))
	months := []string{"JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"}
	days := []string{"SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"}
	const limit = 40 * 24 * time.Hour
	compared := 0
	for i := range cases {
		zone := crossZones[r.IntN(len(crossZones))]
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		e := expr{
			minute: randomField(r, 0, 59, nil),
			hour:   randomField(r, 0, 23, nil),
			dom:    randomField(r, 1, 31, nil),
			month:  randomField(r, 1, 12, months),
			dow:    randomField(r, 0, 6, days),
		}
		if r.IntN(3) > 0 { // keep most schedules dense enough to compare
			e.month = field{text: "*", set: map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 10: true, 11: true, 12: true}, star: true}
		}
		s := trigger.Schedule{Cron: e.String(), Zone: zone}
		if err := s.Check(); err != nil {
			t.Fatalf("case %d: Check(%v) = %v", i, s, err)
		}
		after := time.Date(1995+r.IntN(40), time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), 0, time.UTC)
		if r.IntN(4) > 0 { // near the next change of offset
			if _, end := after.In(loc).ZoneBounds(); !end.IsZero() {
				after = end.Add(time.Duration(r.IntN(6*3600)-3*3600) * time.Second)
			}
		}
		want, wok := naiveNext(e, loc, after, limit)
		got, ok := s.Next(after)
		if !ok {
			t.Fatalf("case %d: %v.Next(%s) = none", i, s, after)
		}
		if wok {
			compared++
			if !got.Equal(want) {
				t.Fatalf("case %d: %v.Next(%s) = %s, naive walk says %s", i, s, after.In(loc), got, want.In(loc))
			}
		} else if !got.After(after.Add(limit)) {
			t.Fatalf("case %d: %v.Next(%s) = %s, naive walk found nothing up to %s", i, s, after.In(loc), got, limit)
		}
	}
	if compared < cases/2 {
		t.Errorf("only %d of %d cases compared within %s", compared, cases, limit)
	}
}
