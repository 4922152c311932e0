package main

// The offline demo: the engine's defaults (MemoryStore, MemoryBus) on a
// fake clock that the program moves a quarter of an hour at a time,
// waiting for the engine to finish what each step made due.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

// step is how far the offline clock moves at a time.
const step = 15 * time.Minute

// settleTimeout bounds the wait for the engine after a step (real time).
const settleTimeout = 20 * time.Second

func runOffline(ctx context.Context, w io.Writer, cfg config) error {
	tl := cmp.Or(cfg.timeline, offlineTimeline())
	start := offlineStart
	clk := clocktest.New(start)
	out := &printer{w: w}
	c := newChat(out, clk.Now, tl)
	c.hold, c.notified = true, cfg.notified
	// The engine's defaults (a MemoryStore and a MemoryBus) take the
	// fake clock from trigger.Config.Clock.
	d, err := newDemo(tl, out, nil, nil, clk, c, logger(cfg))
	if err != nil {
		return err
	}
	defer d.close()
	d.world.setBase(start)

	out.printf("valet scheduler demo — offline: a scripted model, tasks in memory, a fake clock\n")
	out.printf("speeding through two days in %s (set -postgres and -redis for the real thing)\n\n", tl.loc)
	out.printf("%s: Alex sets up four tasks —\n", start.Format("Monday 2 January 2006, 15:04"))
	if err := d.createTasks(ctx, start); err != nil {
		return err
	}
	if err := d.listTasks(ctx); err != nil {
		return err
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.engine.Run(runCtx) }()
	stopped := false
	halt := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stop()
		return <-done
	}
	defer func() { _ = halt() }()

	day := ""
	showDay := func(t time.Time) {
		if s := t.In(tl.loc).Format("Monday 2 January"); s != day {
			day = s
			out.printf("\n── %s ──\n", s)
		}
	}
	deliveries := tl.deliveries()
	end := start.Add(tl.length)
	for now := start; ; now = now.Add(step) {
		if now.After(start) {
			if err := d.waitForScheduler(ctx, clk); err != nil {
				return err
			}
			clk.Advance(now.Sub(clk.Now()))
		}
		if err := d.settle(ctx, clk); err != nil {
			return err
		}
		if d.chat.pending() > 0 {
			showDay(now)
		}
		d.chat.flush()
		for len(deliveries) > 0 && !start.Add(deliveries[0].at).After(now) {
			dv := deliveries[0]
			deliveries = deliveries[1:]
			showDay(now)
			out.printf("  ✉ %s  %s\n", now.In(tl.loc).Format("15:04"), dv.describe())
			if err := d.engine.Publish(ctx, dv.event("", start)); err != nil {
				return err
			}
			if err := d.settle(ctx, clk); err != nil {
				return err
			}
			switch {
			case d.chat.pending() > 0:
			case dv.again:
				out.printf("            · no second run: a task runs once per event id\n")
			default:
				out.printf("            · no task fires\n")
			}
			d.chat.flush()
		}
		if !now.Before(end) {
			break
		}
	}
	if err := halt(); err != nil {
		return err
	}
	out.printf("\n%s: two days later\n", end.In(tl.loc).Format("Monday 2 January 2006, 15:04"))
	return d.summary(ctx)
}

// waitForScheduler waits until the scheduler sleeps on a timer of the
// fake clock, so that an advance fires it.
func (d *demo) waitForScheduler(ctx context.Context, clk *clocktest.Clock) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if err := clk.AwaitTimers(ctx, 1); err != nil {
		return fmt.Errorf("the scheduler is not waiting at %s: %w", clk.Now().Format(time.DateTime), err)
	}
	return nil
}

// settle waits until the engine has done everything due by the clock's
// time (triggertest.WaitIdle): no event waiting on the bus, no ACTIVE
// task due, no run under way, and every finished run's result in the
// chat. The engine works in goroutines of its own, which the fake clock
// does not wait for.
func (d *demo) settle(ctx context.Context, clk *clocktest.Clock) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if err := triggertest.WaitIdle(ctx, d.engine); err != nil {
		return fmt.Errorf("at %s: %w", clk.Now().Format(time.DateTime), err)
	}
	return nil
}

// pending returns how many lines the chat holds.
func (c *chat) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

// ---------------------------------------------------------------- the emails

// delivery is one email event of a timeline: its mail, at a time from
// the start, perhaps delivered again.
type delivery struct {
	mail  mail
	at    time.Duration
	again bool
}

// deliveries returns the events of tl's emails (those after the start,
// and their second deliveries) in order of time.
func (tl *timeline) deliveries() []delivery {
	var ds []delivery
	for _, m := range tl.mails {
		if m.At < 0 {
			continue // in the inbox already
		}
		ds = append(ds, delivery{mail: m, at: m.At})
		if m.Again > 0 {
			ds = append(ds, delivery{mail: m, at: m.Again, again: true})
		}
	}
	slices.SortStableFunc(ds, func(a, b delivery) int { return cmp.Compare(a.at, b.at) })
	return ds
}

func (dv delivery) describe() string {
	s := fmt.Sprintf("mail from %s: %q", dv.mail.From, dv.mail.Subject)
	if dv.again {
		s += " — Gmail delivers the same event again"
	}
	return s
}

// event is the "message.received" event of the delivery; its ID is the
// same on both deliveries of a mail. round tells the events of one live
// demo from those of the last.
func (dv delivery) event(round string, start time.Time) trigger.Event {
	m := dv.mail
	return trigger.Event{
		ID:       "gmail-" + round + m.ID,
		TenantID: tenantID,
		Source:   "gmail",
		Type:     "message.received",
		At:       start.Add(m.At),
		Data: map[string]any{
			"from":    map[string]any{"name": m.FromName, "address": m.From, "domain": m.domain()},
			"subject": m.Subject,
			"snippet": m.Snippet,
		},
	}
}
