// Package controltest is the conformance suite of agent.Control: the
// behaviour an Orchestrator relies on to steer a running loop (running
// markers, the paused flag, the bounded inject queue, signals kept apart
// per conversation and per run, a signal for a run that ended refused).
// agent.MemoryControl and redispool.Control pass it; run it on any other
// implementation:
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
		stopA := c.Subscribe("a:b", "c", "run_a", a.hear)
		stopB := c.Subscribe("a", "b:c", "run_b", b.hear)
		defer stopB()
		stopA2 := c.Subscribe("a:b", "c", "run_a", a2.hear)
		defer stopA2()
		must(t, ignore(c.Begin(ctx, "a:b", "c", "run_a", true)))
		must(t, ignore(c.Begin(ctx, "a", "b:c", "run_b", true)))
		must(t, c.Publish(ctx, "a:b", "c", "run_a", agent.SignalCancel))
		must(t, c.Publish(ctx, "a", "b:c", "run_b", agent.SignalPause))
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
		must(t, c.Publish(ctx, "a:b", "c", "run_a", agent.SignalInject))
		a2.await(t, 2)
		must(t, c.Publish(ctx, "a", "b:c", "run_b", agent.SignalInject)) // in order after the one above
		b.await(t, 2)
		if got := a.all(); len(got) != 1 {
			t.Fatalf("a stopped subscriber heard %v", got)
		}
		// A running loop nobody listens to is not an error.
		must(t, ignore(c.Begin(ctx, "u9", "c9", "run_9", true)))
		must(t, c.Publish(ctx, "u9", "c9", "run_9", agent.SignalCancel))
	})

	t.Run("SignalNeedsItsRunRunning", func(t *testing.T) {
		c := newControl(t)
		for _, id := range []string{"", "run_1"} {
			if err := c.Publish(ctx, "u1", "c1", id, agent.SignalCancel); !errors.Is(err, agent.ErrNotRunning) {
				t.Fatalf("Publish for run %q with none running: %v, want ErrNotRunning", id, err)
			}
		}
		must(t, ignore(c.Begin(ctx, "u1", "c1", "run_1", true)))
		if err := c.Publish(ctx, "u1", "c1", "run_0", agent.SignalPause); !errors.Is(err, agent.ErrNotRunning) {
			t.Fatalf("Publish for another run than the running one: %v, want ErrNotRunning", err)
		}
		if err := c.Publish(ctx, "u1", "c2", "run_1", agent.SignalPause); !errors.Is(err, agent.ErrNotRunning) {
			t.Fatalf("Publish for a run of another conversation: %v, want ErrNotRunning", err)
		}
	})

	// The race of Orchestrator.Cancel with the end of a run: Cancel saw
	// run_1 running, then run_1 ended and run_2 began (subscribed before
	// its Begin, as an orchestrator does); the signal for run_1 is refused
	// and run_2 never hears it, nor what is published for run_1's
	// subscription still open.
	t.Run("SignalForAnEndedRunNeverReachesTheNext", func(t *testing.T) {
		c := newControl(t)
		r1, r2 := newRecorder(), newRecorder()
		stop1 := c.Subscribe("u1", "c1", "run_1", r1.hear)
		defer stop1()
		must(t, ignore(c.Begin(ctx, "u1", "c1", "run_1", true)))
		stop2 := c.Subscribe("u1", "c1", "run_2", r2.hear)
		defer stop2()
		must(t, c.Publish(ctx, "u1", "c1", "run_1", agent.SignalInject))
		r1.await(t, 1)
		must(t, c.End(ctx, "u1", "c1", "run_1", false))
		must(t, ignore(c.Begin(ctx, "u1", "c1", "run_2", true)))
		for _, sig := range []agent.Signal{agent.SignalCancel, agent.SignalPause} {
			if err := c.Publish(ctx, "u1", "c1", "run_1", sig); !errors.Is(err, agent.ErrNotRunning) {
				t.Fatalf("%s for run_1 after it ended: %v, want ErrNotRunning", sig, err)
			}
		}
		must(t, c.Publish(ctx, "u1", "c1", "run_2", agent.SignalInject))
		r2.await(t, 1) // signals of a conversation arrive in order: the refused ones would be first
		if got := r2.all(); !slices.Equal(got, []agent.Signal{agent.SignalInject}) {
			t.Fatalf("run_2 heard %v; want only its own inject", got)
		}
		if got := r1.all(); !slices.Equal(got, []agent.Signal{agent.SignalInject}) {
			t.Fatalf("run_1 heard %v; want only the inject sent while it ran", got)
		}
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
