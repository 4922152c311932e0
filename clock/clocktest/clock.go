package clocktest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"
)

// Clock is a fake clock.Clock for tests: Now stands still until Advance
// or Set moves it, and a timer fires when the clock reaches its
// deadline. It is safe for concurrent use. The zero value starts at the
// zero time; New picks the start.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	pending []*timer      // not fired, not stopped
	changed chan struct{} // closed, and replaced, whenever pending grows
}

var _ clock.Clock = (*Clock)(nil)

// New returns a Clock that reads now until it is moved.
func New(now time.Time) *Clock { return &Clock{now: now} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d,
// delivering the clock's time then; at once when d ≤ 0.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{clock: c, deadline: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.pending = append(c.pending, t)
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
	return t
}

// Advance moves the clock forward by d (a negative d is ignored) and
// fires, earliest deadline first, the timers it reaches.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.fire()
}

// Set moves the clock to t and fires, earliest deadline first, the
// timers it reaches. A t before Now is ignored: the clock never goes
// back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	c.fire()
}

// fire delivers the clock's time to every pending timer whose deadline
// it has reached. c.mu is held.
func (c *Clock) fire() {
	slices.SortStableFunc(c.pending, func(a, b *timer) int { return a.deadline.Compare(b.deadline) })
	kept := c.pending[:0]
	for _, t := range c.pending {
		if t.deadline.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now // never blocks: a timer fires once into a buffer of one
	}
	clear(c.pending[len(kept):])
	c.pending = kept
}

// Timers returns how many timers are waiting to fire.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// AwaitTimers blocks until at least n timers are waiting to fire — the
// code under test is asleep — or ctx is done (ctx.Err()). Call it before
// Advance, so the advance does not race ahead of the timer it is meant to
// fire.
func (c *Clock) AwaitTimers(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.pending) >= n {
			c.mu.Unlock()
			return nil
		}
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

type timer struct {
	clock    *Clock
	deadline time.Time
	ch       chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.pending, t)
	if i < 0 {
		return false
	}
	c.pending = slices.Delete(c.pending, i, i+1)
	return true
}
