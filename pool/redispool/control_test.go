package redispool

import (
	"context"
	"errors"
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
	if _, err := dead.Begin(ctx, "u1", "c1", "run_1"); err != nil {
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
	if _, err := c.Begin(ctx, "u1", "c1", "run_1"); err != nil {
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
