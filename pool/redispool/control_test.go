package redispool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/controltest"
	"github.com/valetkit/valet/pool"
)

func newTestControl(t *testing.T, prefix string, cfg ControlConfig) *Control {
	t.Helper()
	cfg.Prefix = prefix
	c, err := NewControl(client(t, prefix), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestControlConformance(t *testing.T) {
	controltest.Run(t, func(t *testing.T) agent.Control {
		return newTestControl(t, uniquePrefix(), ControlConfig{})
	})
}

// A replica that dies stops refreshing its markers: they expire, and
// Cancel on another replica then finds nothing running.
func TestControlMarkerOfADeadReplicaExpires(t *testing.T) {
	prefix := uniquePrefix()
	ctx := context.Background()
	dead := newTestControl(t, prefix, ControlConfig{TTL: 30 * time.Millisecond})
	alive := newTestControl(t, prefix, ControlConfig{})
	if _, err := dead.Begin(ctx, "u1", "c1", "run_1", true); err != nil {
		t.Fatal(err)
	}
	if id, err := alive.Running(ctx, "u1", "c1"); err != nil || id != "run_1" {
		t.Fatalf("the other replica sees %q, %v", id, err)
	}
	dead.Close() // the process dies: no End, no refresh
	deadline := time.Now().Add(10 * time.Second)
	for {
		id, err := alive.Running(ctx, "u1", "c1")
		if err != nil {
			t.Fatal(err)
		}
		if id == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the dead replica's marker never expired")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A live loop's marker outlives many TTLs: the Control refreshes it.
func TestControlRefreshesALiveMarker(t *testing.T) {
	prefix := uniquePrefix()
	ctx := context.Background()
	c := newTestControl(t, prefix, ControlConfig{TTL: 300 * time.Millisecond})
	if _, err := c.Begin(ctx, "u1", "c1", "run_1", true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // over three TTLs
	if id, err := c.Running(ctx, "u1", "c1"); err != nil || id != "run_1" {
		t.Fatalf("after three TTLs the marker is %q, %v", id, err)
	}
	if err := c.End(ctx, "u1", "c1", "run_1", false); err != nil {
		t.Fatal(err)
	}
	if id, _ := c.Running(ctx, "u1", "c1"); id != "" {
		t.Fatalf("marker %q after End", id)
	}
}

func TestControlConfig(t *testing.T) {
	if _, err := NewControl(nil, ControlConfig{}); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Fatalf("nil client: %v", err)
	}
	for _, cfg := range []ControlConfig{{TTL: time.Millisecond}, {TTL: -1}, {MaxQueued: -1}, {QueueTTL: -1}} {
		if _, err := cfg.withDefaults(); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	c, err := ControlConfig{}.withDefaults()
	if err != nil || c.TTL != DefaultControlTTL || c.Prefix != DefaultPrefix || c.MaxQueued != agent.DefaultMaxQueued {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	if got := globEscape(`a*b?[c]\`); got != `a\*b\?\[c\]\\` {
		t.Fatalf("globEscape: %q", got)
	}
}

// A signal whose published message is lost (the subscription's
// connection was down) still reaches the running loop: the Control hands
// over what was recorded for it when it refreshes the marker. One
// recorded for another run is not handed over.
func TestControlRecoversALostSignal(t *testing.T) {
	prefix := uniquePrefix()
	ctx := context.Background()
	c := newTestControl(t, prefix, ControlConfig{TTL: 30 * time.Millisecond})
	heard := make(chan agent.Signal, 8)
	stop := c.Subscribe("u1", "c1", "run_1", func(s agent.Signal) { heard <- s })
	defer stop()
	if _, err := c.Begin(ctx, "u1", "c1", "run_1", true); err != nil {
		t.Fatal(err)
	}
	// What Publish records, without the message.
	sigs := c.key("u1", "c1", "sig")
	if err := c.rdb.HSet(ctx, sigs, "run_0:cancel", "1", "run_1:pause", "1").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-heard:
		if s != agent.SignalPause {
			t.Fatalf("heard %q, want pause", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the recorded signal never reached the loop")
	}
	// Handed over once; another run's stays unheard.
	if n, err := c.rdb.HExists(ctx, sigs, "run_1:pause").Result(); err != nil || n {
		t.Fatalf("the handed-over signal is still recorded (%v, %v)", n, err)
	}
	select {
	case s := <-heard:
		t.Fatalf("heard %q as well", s)
	default:
	}
}

// Publish records a signal only for the conversation's running loop:
// for a run not running it records nothing and returns ErrNotRunning.
func TestControlPublishRecordsForTheRunningLoop(t *testing.T) {
	prefix := uniquePrefix()
	ctx := context.Background()
	c := newTestControl(t, prefix, ControlConfig{})
	if err := c.Publish(ctx, "u1", "c1", "run_7", agent.SignalCancel); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Publish with no loop running: %v, want ErrNotRunning", err)
	}
	if n, _ := c.rdb.Exists(ctx, c.key("u1", "c1", "sig")).Result(); n != 0 {
		t.Fatal("a signal with no loop running was recorded")
	}
	if _, err := c.Begin(ctx, "u1", "c1", "run_7", true); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, "u1", "c1", "run_6", agent.SignalCancel); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Publish for another run: %v, want ErrNotRunning", err)
	}
	if n, _ := c.rdb.Exists(ctx, c.key("u1", "c1", "sig")).Result(); n != 0 {
		t.Fatal("a signal for a run not running was recorded")
	}
	if err := c.Publish(ctx, "u1", "c1", "run_7", agent.SignalCancel); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.rdb.HExists(ctx, c.key("u1", "c1", "sig"), "run_7:cancel").Result(); !ok {
		t.Fatal("the signal was not recorded for the running loop")
	}
}

// A signal a replica hears late — its dispatching was held up until the
// loop it was sent for had ended and the conversation's next run had
// begun on that replica — does not reach the next run: it names its run,
// and only that run's subscriptions hear it.
func TestControlLateSignalDoesNotStopTheNextRun(t *testing.T) {
	prefix := uniquePrefix()
	ctx := context.Background()
	c1 := newTestControl(t, prefix, ControlConfig{})
	c2 := newTestControl(t, prefix, ControlConfig{})
	// Hold up c2's dispatching: its goroutine blocks in a subscriber of
	// another conversation until released.
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	stopHold := c2.Subscribe("u1", "other", "run_o", func(agent.Signal) { once.Do(func() { close(held) }); <-release })
	defer stopHold()
	must(t, ignore(c1.Begin(ctx, "u1", "other", "run_o", true)))
	must(t, c1.Publish(ctx, "u1", "other", "run_o", agent.SignalInject))
	<-held

	// The first run, on c1, is paused from c2; c1 hands it over.
	first := make(chan agent.Signal, 4)
	stopFirst := c1.Subscribe("u1", "c1", "run_1", func(s agent.Signal) { first <- s })
	if _, err := c1.Begin(ctx, "u1", "c1", "run_1", true); err != nil {
		t.Fatal(err)
	}
	must(t, c2.Publish(ctx, "u1", "c1", "run_1", agent.SignalPause))
	if s := <-first; s != agent.SignalPause {
		t.Fatalf("the first run heard %q", s)
	}
	stopFirst()
	must(t, c1.End(ctx, "u1", "c1", "run_1", true))

	// The next run begins on c2, whose copy of the pause is still queued.
	next := make(chan agent.Signal, 4)
	stopNext := c2.Subscribe("u1", "c1", "run_2", func(s agent.Signal) { next <- s })
	defer stopNext()
	if _, err := c2.Begin(ctx, "u1", "c1", "run_2", true); err != nil {
		t.Fatal(err)
	}
	close(release)
	// A signal for the next run, published after the stale one, comes
	// after it: the first the next run hears must be this one.
	must(t, c1.Publish(ctx, "u1", "c1", "run_2", agent.SignalInject))
	select {
	case s := <-next:
		if s != agent.SignalInject {
			t.Fatalf("the next run heard %q, a signal sent for the run before it", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next run heard nothing")
	}
	if ok, _ := c1.rdb.HExists(ctx, c1.key("u1", "c1", "sig"), "run_1:pause").Result(); ok {
		t.Fatal("run_1's pause is still recorded after its End")
	}
}

func ignore(_ agent.Begun, err error) error { return err }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
