package trigger

import (
	"errors"
	"fmt"
	"math/big"
	"time"
)

// Errors, checked with errors.Is.
var (
	// ErrInvalid: a Schedule that sets none or more than one of Cron,
	// Every and At, a malformed cron expression, a cron expression that
	// never matches a date, an unknown zone, an interval under MinEvery,
	// a MissedPolicy that is not one of the constants; a Task, Trigger or
	// Run that fails its Check; a bad argument to a Store method.
	ErrInvalid = errors.New("trigger: invalid")
	// ErrNotFound: no such task (or run) for that tenant. A task of
	// another tenant is not found.
	ErrNotFound = errors.New("trigger: not found")
	// ErrConflict: a task (or run) with that id exists already, or an
	// Update carried a Revision that is no longer the stored one.
	ErrConflict = errors.New("trigger: conflict")
)

// MinEvery is the shortest interval of an Every schedule.
const MinEvery = time.Second

// Schedule says when a task runs. Exactly one of Cron, Every and At is
// set; Check reports any other combination. The zero Schedule is not
// valid. A Schedule is a plain value: compare it, copy it, store it as
// JSON.
//
//	trigger.Schedule{Cron: "0 9 * * MON-FRI", Zone: "Europe/Paris"} // 09:00 on weekdays, Paris time
//	trigger.Schedule{Every: 15 * time.Minute}                      // :00, :15, :30, :45 UTC
//	trigger.Schedule{At: time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)} // once
//
// See the package documentation for the cron syntax, the zone and
// daylight-saving rules and the interval anchor.
type Schedule struct {
	// Cron is a standard 5-field cron expression: minute, hour, day of
	// month, month, day of week, read by robfig/cron/v3's parser.
	// Descriptors ("@daily", "@every 1h") and a "TZ=" prefix are not
	// accepted: use Every, and Zone.
	Cron string `json:"cron,omitempty"`
	// Zone is the IANA time zone ("Europe/Paris") whose wall clock Cron
	// reads. Default: "UTC". "Local" is refused: replicas on machines in
	// other zones would disagree. Only with Cron.
	Zone string `json:"zone,omitempty"`

	// Every runs the task at Start + k×Every for k = 0, 1, 2…; at least
	// MinEvery.
	Every time.Duration `json:"every,omitempty"`
	// Start anchors Every: the first run and the phase of the others.
	// Default (zero): the Unix epoch, so that a zero Start gives every
	// replica the same times (Every: time.Hour runs on the hour, UTC).
	// Only with Every.
	Start time.Time `json:"start,omitzero"`

	// At runs the task once, at this instant.
	At time.Time `json:"at,omitzero"`
}

// Check reports whether s is a valid schedule, wrapping ErrInvalid with
// what is wrong when it is not.
func (s Schedule) Check() error {
	_, err := s.compile()
	return err
}

// Next returns the first time of s strictly after after, and true; or
// false when there is none: a one-time schedule already passed, or an
// invalid schedule (call Check to know why).
//
// Cron times are returned in the schedule's zone, others in after's
// location (At as given); compare them with Equal.
func (s Schedule) Next(after time.Time) (time.Time, bool) {
	c, err := s.compile()
	if err != nil {
		return time.Time{}, false
	}
	return c.next(after)
}

// String describes s for logs: "cron 0 9 * * * Europe/Paris", "every 1h0m0s
// from 1970-01-01T00:00:00Z", "at 2026-05-01T08:00:00Z".
func (s Schedule) String() string {
	switch {
	case s.Cron != "" && s.Every == 0 && s.At.IsZero():
		zone := s.Zone
		if zone == "" {
			zone = "UTC"
		}
		return fmt.Sprintf("cron %s %s", s.Cron, zone)
	case s.Every != 0 && s.Cron == "" && s.At.IsZero():
		return fmt.Sprintf("every %s from %s", s.Every, s.anchor().Format(time.RFC3339Nano))
	case !s.At.IsZero() && s.Cron == "" && s.Every == 0:
		return "at " + s.At.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("invalid schedule %+v", struct {
		Cron, Zone string
		Every      time.Duration
		Start, At  time.Time
	}(s))
}

func (s Schedule) anchor() time.Time {
	if s.Start.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return s.Start
}

// compiled is a checked schedule, ready to compute times.
type compiled interface {
	next(after time.Time) (time.Time, bool)
}

func (s Schedule) compile() (compiled, error) {
	set := 0
	if s.Cron != "" {
		set++
	}
	if s.Every != 0 {
		set++
	}
	if !s.At.IsZero() {
		set++
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: schedule: set exactly one of Cron, Every and At", ErrInvalid)
	}
	if s.Zone != "" && s.Cron == "" {
		return nil, fmt.Errorf("%w: schedule: Zone is only for Cron", ErrInvalid)
	}
	if !s.Start.IsZero() && s.Every == 0 {
		return nil, fmt.Errorf("%w: schedule: Start is only for Every", ErrInvalid)
	}
	switch {
	case s.Cron != "":
		return parseCron(s.Cron, s.Zone)
	case s.Every != 0:
		if s.Every < MinEvery {
			return nil, fmt.Errorf("%w: schedule: Every %s is under %s", ErrInvalid, s.Every, MinEvery)
		}
		return every{start: s.anchor(), d: s.Every}, nil
	default:
		return at(s.At), nil
	}
}

type at time.Time

func (a at) next(after time.Time) (time.Time, bool) {
	if t := time.Time(a); after.Before(t) {
		return t, true
	}
	return time.Time{}, false
}

type every struct {
	start time.Time
	d     time.Duration
}

var nanosPerSecond = big.NewInt(int64(time.Second))

func (e every) next(after time.Time) (time.Time, bool) {
	if after.Before(e.start) {
		return e.start, true
	}
	// elapsed = after - start in nanoseconds, which may not fit a
	// Duration (292 years); big.Int keeps it exact.
	elapsed := new(big.Int).Sub(big.NewInt(after.Unix()), big.NewInt(e.start.Unix()))
	elapsed.Mul(elapsed, nanosPerSecond)
	elapsed.Add(elapsed, big.NewInt(int64(after.Nanosecond()-e.start.Nanosecond())))
	rem := new(big.Int).Mod(elapsed, big.NewInt(int64(e.d))).Int64()
	// after + (d - rem) is the next multiple of d past start, strictly
	// after after (rem = 0 means after is itself a run time).
	return after.Add(e.d - time.Duration(rem)).Round(0), true
}
