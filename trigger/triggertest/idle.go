package triggertest

import (
	"context"
	"fmt"
	"time"

	"github.com/valetkit/valet/trigger"
)

// WaitIdle waits until e is idle ([trigger.Engine.Idle]: no run under
// way, nothing due at the engine's clock's time, no event held by an
// in-memory bus, every finished run's notifications delivered) and
// returns nil, or returns the store's error, or ctx's when it ends first.
// The engine's Run must be under way.
//
// A test on a fake clock calls it after moving the clock, or after
// publishing an event, and before it looks at the results:
//
//	clk.Advance(time.Hour) // 08:00: the digest is due
//	if err := triggertest.WaitIdle(ctx, engine); err != nil {
//		t.Fatal(err)
//	}
//	runs, _ := engine.Runs(ctx, "u1", "digest", 0) // the 08:00 run, finished
//
// The engine works in goroutines of its own, which the fake clock does
// not wait for; WaitIdle looks at it again every few microseconds of real
// time until it is idle, so bound ctx (a test's deadline).
func WaitIdle(ctx context.Context, e *trigger.Engine) error {
	pause := 20 * time.Microsecond
	for {
		idle, err := e.Idle(ctx)
		if err != nil {
			return err
		}
		if idle {
			return nil
		}
		tm := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			tm.Stop()
			return fmt.Errorf("triggertest: the engine is still busy: %w", ctx.Err())
		case <-tm.C:
		}
		pause = min(2*pause, time.Millisecond)
	}
}
