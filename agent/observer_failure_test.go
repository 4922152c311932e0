package agent_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// An Observer that panics on every step does not stop the run; its first
// panic is logged once, with a secret in the panic value masked, and later
// runs are observed (and not logged) again.
func TestObserverPanicIsContainedAndLoggedOnce(t *testing.T) {
	h := newRecordLog()
	calls := 0
	obs := agent.ObserverFunc(func(_ context.Context, s agent.Step) {
		calls++
		panic("observer broke; password: hunter2hunter2")
	})
	s := llmtest.NewScript(llmtest.Text("one"), llmtest.Text("two"))
	o := newOrch(t, s, agent.Config{Observer: obs, Logger: slog.New(h)})
	for _, text := range []string{"hi", "again"} {
		res, err := o.HandleMessage(context.Background(), msg(text))
		if err != nil || res.Status != agent.StatusCompleted {
			t.Fatalf("%q: %+v, %v", text, res, err)
		}
	}
	if calls != 8 {
		t.Fatalf("the observer was called %d times, want 8 (4 steps per run): a panic must not stop later steps", calls)
	}
	var panics []map[string]string
	for _, m := range h.records() {
		if strings.Contains(m["msg"], "Observer panicked") {
			panics = append(panics, m)
		}
	}
	if len(panics) != 1 {
		t.Fatalf("%d panic lines, want 1: %v", len(panics), panics)
	}
	if p := panics[0]["panic"]; strings.Contains(p, "hunter2") || !strings.Contains(p, "observer broke") {
		t.Fatalf("panic logged as %q: want it with the secret masked", p)
	}
}

// blockingObserver blocks on every step until release is closed.
type blockingObserver struct {
	release chan struct{}
	mu      sync.Mutex
	seen    []agent.Step
}

func (b *blockingObserver) Observe(_ context.Context, s agent.Step) {
	<-b.release
	b.mu.Lock()
	b.seen = append(b.seen, s)
	b.mu.Unlock()
}

// Behind an AsyncObserver, an observer that blocks holds no run up: runs
// finish, steps past the buffer are dropped and counted (the first drop
// logged once), and once it unblocks Flush sees the queued steps
// delivered, in order, with the messages as they were sent even though
// later runs reused the run's buffers.
func TestAsyncObserverNeverHoldsARunUp(t *testing.T) {
	h := newRecordLog()
	b := &blockingObserver{release: make(chan struct{})}
	a, err := agent.NewAsyncObserver(b, agent.AsyncObserverConfig{Buffer: 6, Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		n++
		return llmtest.Text("answer " + req.Messages[len(req.Messages)-1].Content)
	})
	o := newOrch(t, s, agent.Config{Observer: a})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, text := range []string{"first", "second", "third"} {
			if _, err := o.HandleMessage(context.Background(), msg(text)); err != nil {
				t.Error(err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runs are held up by a blocked observer")
	}
	// 12 steps for 3 runs: at most 6 wait plus those the observer's
	// goroutine took before it blocked; the others are dropped.
	dropped := a.Dropped()
	if dropped == 0 || dropped > 12-6 {
		t.Fatalf("dropped %d steps, want between 1 and 6", dropped)
	}
	close(b.release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	seen := b.seen
	b.mu.Unlock()
	if uint64(len(seen))+dropped != 12 {
		t.Fatalf("delivered %d steps and dropped %d, want 12 in all", len(seen), dropped)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].RunID == seen[i-1].RunID && seen[i].Seq <= seen[i-1].Seq {
			t.Fatalf("steps out of order: %d then %d", seen[i-1].Seq, seen[i].Seq)
		}
	}
	if seen[1].Kind != agent.StepModelRequest || seen[1].Request.Messages[len(seen[1].Request.Messages)-1].Content != "first" {
		t.Fatalf("the first request as delivered: %+v", seen[1].Request.Messages)
	}
	drops := 0
	for _, m := range h.records() {
		if strings.Contains(m["msg"], "dropped") {
			drops++
		}
	}
	if drops != 1 {
		t.Fatalf("%d drop lines, want 1", drops)
	}
}

// A panicking observer behind an AsyncObserver is contained too.
func TestAsyncObserverContainsPanics(t *testing.T) {
	h := newRecordLog()
	a, err := agent.NewAsyncObserver(agent.ObserverFunc(func(context.Context, agent.Step) { panic("boom") }), agent.AsyncObserverConfig{Logger: slog.New(h)})
	if err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, llmtest.NewScript(llmtest.Text("ok")), agent.Config{Observer: a})
	if _, err := o.HandleMessage(context.Background(), msg("hi")); err != nil {
		t.Fatal(err)
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range h.records() {
		if strings.Contains(m["msg"], "panicked") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d panic lines, want 1", n)
	}
}

func TestNewAsyncObserverRejectsBadConfig(t *testing.T) {
	if _, err := agent.NewAsyncObserver(nil, agent.AsyncObserverConfig{}); err == nil {
		t.Fatal("a nil observer was accepted")
	}
	if _, err := agent.NewAsyncObserver(agent.ObserverFunc(func(context.Context, agent.Step) {}), agent.AsyncObserverConfig{Buffer: -1}); err == nil {
		t.Fatal("a negative buffer was accepted")
	}
}
