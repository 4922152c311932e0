package trigger

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// maxCronLen bounds a cron expression, in bytes.
const maxCronLen = 256

// cronSearchDays bounds the search for a cron schedule's next day. The
// sparsest schedule Check lets through is a leap day ("0 9 29 2 *"),
// at most 8 years apart (2096, then 2104).
const cronSearchDays = 9 * 366

// starBit is robfig/cron's mark, in a field's bits, of a field written
// "*" or "?" (also "*/1"). It decides how day of month and day of week
// combine.
const starBit = 1 << 63

type cronSpec struct {
	minute, hour, dom, month, dow uint64
	loc                           *time.Location
}

func parseCron(expr, zone string) (c *cronSpec, err error) {
	defer func() {
		// robfig/cron is not ours: a panic in its parser is an invalid
		// expression, never a crash of the caller.
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("%w: cron %q: %v", ErrInvalid, expr, r)
		}
	}()
	if len(expr) > maxCronLen {
		return nil, fmt.Errorf("%w: cron expression longer than %d bytes", ErrInvalid, maxCronLen)
	}
	trimmed := strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(trimmed, "@"):
		return nil, fmt.Errorf("%w: cron %q: descriptors are not supported (use 5 fields, or Every)", ErrInvalid, expr)
	case strings.Contains(trimmed, "="):
		return nil, fmt.Errorf("%w: cron %q: a time zone goes in Zone, not in the expression", ErrInvalid, expr)
	}
	loc, err := loadZone(zone)
	if err != nil {
		return nil, err
	}
	p := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	parsed, err := p.Parse(trimmed)
	if err != nil {
		return nil, fmt.Errorf("%w: cron %q: %v", ErrInvalid, expr, err)
	}
	spec, ok := parsed.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%w: cron %q: unexpected schedule %T", ErrInvalid, expr, parsed)
	}
	c = &cronSpec{minute: spec.Minute, hour: spec.Hour, dom: spec.Dom, month: spec.Month, dow: spec.Dow, loc: loc}
	for _, bits := range []uint64{c.minute, c.hour, c.dom, c.month, c.dow} {
		if bits&^starBit == 0 { // robfig/cron reads a field of commas alone as no value
			return nil, fmt.Errorf("%w: cron %q: a field allows no value", ErrInvalid, expr)
		}
	}
	if !c.possible() {
		return nil, fmt.Errorf("%w: cron %q: no month has that day", ErrInvalid, expr)
	}
	return c, nil
}

func loadZone(zone string) (*time.Location, error) {
	switch zone {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf("%w: zone %q: name an IANA zone", ErrInvalid, zone)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, fmt.Errorf("%w: zone %q: %v", ErrInvalid, zone, err)
	}
	return loc, nil
}

// dayMatches applies robfig/cron's rule: when day of month or day of
// week is a star, a day must match both (so only the other restricts);
// when both are restricted, it must match either (as in Vixie cron).
func (c *cronSpec) dayMatches(date time.Time) bool {
	dom := c.dom&(1<<uint(date.Day())) != 0
	dow := c.dow&(1<<uint(date.Weekday())) != 0
	if c.dom&starBit != 0 || c.dow&starBit != 0 {
		return dom && dow
	}
	return dom || dow
}

// possible reports whether some date matches. Only a restricted day of
// month combined with a star day of week can fail ("0 0 30 2 *"):
// otherwise some weekday, which every month has, matches.
func (c *cronSpec) possible() bool {
	if c.dow&starBit == 0 || c.dom&starBit != 0 {
		return true
	}
	longest := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		if c.month&(1<<uint(m)) == 0 {
			continue
		}
		for d := 1; d <= longest[m]; d++ {
			if c.dom&(1<<uint(d)) != 0 {
				return true
			}
		}
	}
	return false
}

// next walks the zone's wall-clock minutes from after's, day by day, and
// returns the first matching minute whose instant (see firstAtOrAfter)
// is after after. That instant never decreases as the wall clock
// advances, and every wall minute before after's has an instant at or
// before after, so the walk can start at after's own minute.
func (c *cronSpec) next(after time.Time) (time.Time, bool) {
	a := after.In(c.loc)
	y, mo, d := a.Date()
	startHour, startMinute := a.Hour(), a.Minute()
	day := time.Date(y, mo, d, 0, 0, 0, 0, time.UTC) // a civil date: wall clock read as UTC
	for i := 0; i <= cronSearchDays; i, day = i+1, day.AddDate(0, 0, 1) {
		if c.month&(1<<uint(day.Month())) == 0 || !c.dayMatches(day) {
			continue
		}
		for h := 0; h < 24; h++ {
			if c.hour&(1<<uint(h)) == 0 || (i == 0 && h < startHour) {
				continue
			}
			for m := 0; m < 60; m++ {
				if c.minute&(1<<uint(m)) == 0 || (i == 0 && h == startHour && m < startMinute) {
					continue
				}
				wall := day.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
				if t := firstAtOrAfter(c.loc, wall); t.After(after) {
					return t, true
				}
			}
		}
	}
	return time.Time{}, false
}

// firstAtOrAfter returns the first instant at which loc's wall clock
// reads wall (a civil time given in UTC) or later. That is the first
// occurrence of a wall time that occurs twice (clocks set back), and the
// first instant after the gap for one that does not occur (clocks set
// forward).
func firstAtOrAfter(loc *time.Location, wall time.Time) time.Time {
	w := wall.Unix()
	// No offset exceeds a day, so two days before, the wall clock reads
	// earlier than wall. Walk the zone's periods from there.
	p := time.Unix(w-2*86400, 0).In(loc)
	for range 64 {
		_, offset := p.Zone()
		_, end := p.ZoneBounds()
		if p.Unix()+int64(offset) >= w {
			// The clock jumped from before wall to after it at p, the
			// start of this period.
			return p
		}
		if end.IsZero() || w-int64(offset) < end.Unix() {
			return time.Unix(w-int64(offset), 0).In(loc)
		}
		p = end.In(loc)
	}
	// Unreachable with real zone data (a few periods at most); fall back
	// on the standard library's choice.
	return time.Date(wall.Year(), wall.Month(), wall.Day(), wall.Hour(), wall.Minute(), 0, 0, loc)
}
