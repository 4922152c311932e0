// Package controltest is the conformance suite of agent.Control: the
// behaviour an Orchestrator relies on to steer a running loop (running
// markers, the paused flag, the bounded inject queue, signals kept apart
// per conversation). agent.MemoryControl and redispool.Control pass it;
// run it on any other implementation:
//
//	func TestMyControl(t *testing.T) {
//		controltest.Run(t, func(t *testing.T) agent.Control { return newMyControl(t) })
//	}
//
// newControl must return a fresh Control, sharing nothing with the
// others it returns, whose queue bounds are the defaults
// (agent.DefaultMaxQueued, agent.DefaultMaxQueuedBytes).
package controltest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
)

// wait bounds how long a published signal may take to arrive before the
// suite fails (a failure detector, not a timing assertion).
const wait = 10 * time.Second

// Run runs the suite, each case on a Control from newControl.
func Run(t *testing.T, newControl func(t *testing.T) agent.Control) {
	ctx := context.Background()

	t.Run("Marker", func(t *testing.T) {
		c := newControl(t)
		mustRunning(t, c, "u1", "c1", "")
		if _, err := c.Begin(ctx, "u1", "c1", "run_1", true); err != nil {
			t.Fatal(err)
		}
		mustRunning(t, c, "u1", "c1", "run_1")
		mustRunning(t, c, "u1", "c2", "")
		mustRunning(t, c, "u2", "c1", "")
		// Another run's End leaves the marker.
		if err := c.End(ctx, "u1", "c1", "run_0", false); err != nil {
			t.Fatal(err)
		}
		mustRunning(t, c, "u1", "c1", "run_1")
		if err := c.End(ctx, "u1", "c1", "run_1", false); err != nil {
			t.Fatal(err)
		}
		mustRunning(t, c, "u1", "c1", "")
	})

	t.Run("PairsWithSeparatorsStayApart", func(t *testing.T) {
		c := newControl(t)
		if _, err := c.Begin(ctx, "a:b", "c", "run_1", true); err != nil {
			t.Fatal(err)
		}
		mustRunning(t, c, "a", "b:c", "")
		mustRunning(t, c, "a:b:c", "", "")
		if err := c.Push(ctx, "a", "b:c", "for a / b:c"); err != nil {
			t.Fatal(err)
		}
		got, err := c.Drain(ctx, "a:b", "c")
		if err != nil || len(got) != 0 {
			t.Fatalf("Drain of a:b / c: %q, %v; want nothing", got, err)
		}
	})

	t.Run("PausedOnce", func(t *testing.T) {
		c := newControl(t)
		if _, err := c.Begin(ctx, "u1", "c1", "run_1", true); err != nil {
			t.Fatal(err)
		}
		if err := c.End(ctx, "u1", "c1", "run_1", true); err != nil {
			t.Fatal(err)
		}
		b, err := c.Begin(ctx, "u1", "c1", "run_2", true)
		if err != nil || !b.Paused {
			t.Fatalf("Begin after a paused End: %+v, %v; want Paused", b, err)
		}
		if err := c.End(ctx, "u1", "c1", "run_2", false); err != nil {
			t.Fatal(err)
		}
		if b, _ := c.Begin(ctx, "u1", "c1", "run_3", true); b.Paused {
			t.Fatal("Paused reported twice")
		}
		if b, _ := c.Begin(ctx, "u1", "c2", "run_4", true); b.Paused {
			t.Fatal("another conversation reported Paused")
		}
	})

	t.Run("BeginWithoutTakeLeavesThem", func(t *testing.T) {
		c := newControl(t)
		must(t, ignore(c.Begin(ctx, "u1", "c1", "run_1", true)))
		must(t, c.End(ctx, "u1", "c1", "run_1", true))
		must(t, c.Push(ctx, "u1", "c1", "for the user"))
		b, err := c.Begin(ctx, "u1", "c1", "run_2", false)
		if err != nil || b.Paused || len(b.Queued) != 0 {
			t.Fatalf("Begin without take: %+v, %v; want nothing taken", b, err)
		}
		mustRunning(t, c, "u1", "c1", "run_2")
		must(t, c.End(ctx, "u1", "c1", "run_2", false))
		b, err = c.Begin(ctx, "u1", "c1", "run_3", true)
		if err != nil || !b.Paused || !slices.Equal(b.Queued, []string{"for the user"}) {
			t.Fatalf("Begin with take after one without: %+v, %v; want the pause and the text", b, err)
		}
	})

	t.Run("ForgetDropsPauseAndQueue", func(t *testing.T) {
		c := newControl(t)
		must(t, ignore(c.Begin(ctx, "u1", "c1", "run_1", true)))
		must(t, c.End(ctx, "u1", "c1", "run_1", true))
		must(t, c.Push(ctx, "u1", "c1", "forgotten"))
		must(t, ignore(c.Begin(ctx, "u1", "c2", "run_2", true)))
		must(t, c.End(ctx, "u1", "c2", "run_2", true))
		must(t, c.Forget(ctx, "u1", "c1"))
		if b, err := c.Begin(ctx, "u1", "c1", "run_3", true); err != nil || b.Paused || len(b.Queued) != 0 {
			t.Fatalf("Begin after Forget: %+v, %v; want nothing", b, err)
		}
		if b, err := c.Begin(ctx, "u1", "c2", "run_4", true); err != nil || !b.Paused {
			t.Fatalf("Forget of c1 dropped c2's pause: %+v, %v", b, err)
		}
		must(t, c.Forget(ctx, "u1", "nothing-here"))
	})

	t.Run("Queue", func(t *testing.T) {
		c := newControl(t)
		for _, s := range []string{"one", "two", "three"} {
			if err := c.Push(ctx, "u1", "c1", s); err != nil {
				t.Fatal(err)
			}
		}
		got, err := c.Drain(ctx, "u1", "c1")
		if err != nil || !slices.Equal(got, []string{"one", "two", "three"}) {
			t.Fatalf("Drain: %q, %v; want one, two, three", got, err)
		}
		if got, err := c.Drain(ctx, "u1", "c1"); err != nil || len(got) != 0 {
			t.Fatalf("second Drain: %q, %v; want nothing", got, err)
		}
		if err := c.Push(ctx, "u1", "c1", "before the run"); err != nil {
			t.Fatal(err)
		}
		b, err := c.Begin(ctx, "u1", "c1", "run_1", true)
		if err != nil || !slices.Equal(b.Queued, []string{"before the run"}) {
			t.Fatalf("Begin: %+v, %v; want the queued text", b, err)
		}
		if got, _ := c.Drain(ctx, "u1", "c1"); len(got) != 0 {
			t.Fatalf("Begin left %q queued", got)
		}
	})

	t.Run("QueueBounds", func(t *testing.T) {
		c := newControl(t)
		for i := range agent.DefaultMaxQueued {
			if err := c.Push(ctx, "u1", "c1", "x"); err != nil {
				t.Fatalf("push %d: %v", i, err)
			}
		}
		if err := c.Push(ctx, "u1", "c1", "x"); !errors.Is(err, agent.ErrQueueFull) {
			t.Fatalf("push over MaxQueued: %v, want ErrQueueFull", err)
		}
		if err := c.Push(ctx, "u1", "c2", strings.Repeat("y", agent.DefaultMaxQueuedBytes+1)); !errors.Is(err, agent.ErrQueueFull) {
			t.Fatalf("push over MaxQueuedBytes: %v, want ErrQueueFull", err)
		}
		if got, _ := c.Drain(ctx, "u1", "c2"); len(got) != 0 {
			t.Fatal("a refused push was queued")
		}
		if got, _ := c.Drain(ctx, "u1", "c1"); len(got) != agent.DefaultMaxQueued {
			t.Fatalf("drained %d, want %d", len(got), agent.DefaultMaxQueued)
		}
		if err := c.Push(ctx, "u1", "c1", "x"); err != nil {
			t.Fatalf("push after the drain: %v", err)
		}
	})

	t.Run("Signals", func(t *testing.T) {
		c := newControl(t)
		a, b, a2 := newRecorder(), newRecorder(), newRecorder()
		stopA := c.Subscribe("a:b", "c", a.hear)
		stopB := c.Subscribe("a", "b:c", b.hear)
		defer stopB()
		stopA2 := c.Subscribe("a:b", "c", a2.hear)
		defer stopA2()
		must(t, c.Publish(ctx, "a:b", "c", agent.SignalCancel))
		must(t, c.Publish(ctx, "a", "b:c", agent.SignalPause))
		b.await(t, 1)
		a.await(t, 1)
		a2.await(t, 1)
		if got := a.all(); !slices.Equal(got, []agent.Signal{agent.SignalCancel}) {
			t.Fatalf("a:b / c heard %v", got)
		}
		if got := b.all(); !slices.Equal(got, []agent.Signal{agent.SignalPause}) {
			t.Fatalf("a / b:c heard %v", got)
		}
		stopA()
		must(t, c.Publish(ctx, "a:b", "c", agent.SignalInject))
		a2.await(t, 2)
		must(t, c.Publish(ctx, "a", "b:c", agent.SignalInject)) // in order after the one above
		b.await(t, 2)
		if got := a.all(); len(got) != 1 {
			t.Fatalf("a stopped subscriber heard %v", got)
		}
		// Nobody listening is not an error.
		must(t, c.Publish(ctx, "u9", "c9", agent.SignalCancel))
	})
}

func ignore(_ agent.Begun, err error) error { return err }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustRunning(t *testing.T, c agent.Control, tenant, conv, want string) {
	t.Helper()
	got, err := c.Running(context.Background(), tenant, conv)
	if err != nil || got != want {
		t.Fatalf("Running(%q, %q) = %q, %v; want %q", tenant, conv, got, err, want)
	}
}

type recorder struct {
	mu   sync.Mutex
	sigs []agent.Signal
	more chan struct{}
}

func newRecorder() *recorder { return &recorder{more: make(chan struct{}, 64)} }

func (r *recorder) hear(s agent.Signal) {
	r.mu.Lock()
	r.sigs = append(r.sigs, s)
	r.mu.Unlock()
	select {
	case r.more <- struct{}{}:
	default:
	}
}

func (r *recorder) all() []agent.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sigs)
}

// await waits until n signals were heard.
func (r *recorder) await(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(wait)
	for len(r.all()) < n {
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("heard %v, waiting for %d signals", r.all(), n)
		}
	}
}
