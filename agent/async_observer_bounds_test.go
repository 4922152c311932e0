package agent_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
)

// gateObserver hands each step it gets to seen and then waits for one
// token on next before returning.
type gateObserver struct {
	seen chan agent.Step
	next chan struct{}
}

func (g *gateObserver) Observe(_ context.Context, s agent.Step) {
	g.seen <- s
	<-g.next
}

// AsyncObserverConfig.Buffer is how many steps may wait for the observer:
// with Buffer 2 and the observer busy with one step, a third waiting step
// is dropped. (The drain moves the whole queue into a batch and then
// accepts a full queue again, so up to twice Buffer steps wait.)
func TestAsyncObserverHoldsAtMostBufferSteps(t *testing.T) {
	g := &gateObserver{seen: make(chan agent.Step, 16), next: make(chan struct{}, 16)}
	a, err := agent.NewAsyncObserver(g, agent.AsyncObserverConfig{Buffer: 2, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	step := func(seq int) { a.Observe(ctx, agent.Step{Kind: agent.StepNote, Seq: seq, RunID: "run_x"}) }
	defer func() {
		for range 16 {
			g.next <- struct{}{}
		}
		if err := a.Flush(ctx); err != nil {
			t.Error(err)
		}
	}()

	step(1)
	if s := <-g.seen; s.Seq != 1 { // the observer is busy with step 1
		t.Fatalf("first delivered %d", s.Seq)
	}
	step(2)
	step(3) // 2 and 3 wait: the buffer is full
	g.next <- struct{}{}
	if s := <-g.seen; s.Seq != 2 { // busy with 2; 3 waits
		t.Fatalf("second delivered %d", s.Seq)
	}
	step(4) // 3 and 4 wait: full again
	step(5) // a third waiting step: must be dropped
	if d := a.Dropped(); d != 1 {
		t.Fatalf("with Buffer 2, steps 3, 4 and 5 all wait for the observer: Dropped() = %d, want 1", d)
	}
}

// Flush waits for the steps queued so far: a run that keeps observing
// steps after Flush was called does not keep Flush from returning once
// those are delivered.
func TestAsyncObserverFlushReturnsUnderSteadyTraffic(t *testing.T) {
	var a *agent.AsyncObserver
	var delivered atomic.Int64
	var stop atomic.Bool
	// Each delivered step is followed by another one observed, as on a
	// busy server where runs go on while Flush is called.
	next := agent.ObserverFunc(func(ctx context.Context, s agent.Step) {
		delivered.Add(1)
		if !stop.Load() {
			a.Observe(ctx, agent.Step{Kind: agent.StepNote, Seq: s.Seq + 1, RunID: "run_x"})
		}
	})
	var err error
	a, err = agent.NewAsyncObserver(next, agent.AsyncObserverConfig{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		stop.Store(true)
		_ = a.Flush(context.Background())
	}()
	a.Observe(context.Background(), agent.Step{Kind: agent.StepNote, Seq: 1, RunID: "run_x"})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := a.Flush(ctx); err != nil {
		t.Fatalf("Flush = %v after %d steps were delivered (the one queued before Flush among them)", err, delivered.Load())
	}
}
