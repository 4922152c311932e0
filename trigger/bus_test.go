package trigger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

// noLeaks checks, once t and its subtests are over, that they left no
// goroutine behind.
func noLeaks(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

func TestMemoryBus(t *testing.T) {
	noLeaks(t)
	triggertest.RunBus(t, func(t *testing.T) trigger.EventBus {
		return &trigger.MemoryBus{RedeliveryDelay: 10 * time.Millisecond}
	})
}

func TestMemoryBusZeroValue(t *testing.T) {
	noLeaks(t)
	triggertest.RunBus(t, func(t *testing.T) trigger.EventBus { return trigger.NewMemoryBus() })
}

// runSub runs b.Subscribe(h) until the test ends.
func runSub(t *testing.T, b *trigger.MemoryBus, h trigger.EventHandler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Subscribe(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Subscribe: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestMemoryBusRedeliveryDelay(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	clk := clocktest.New(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	b := &trigger.MemoryBus{Clock: clk, RedeliveryDelay: time.Minute}
	var calls atomic.Int32
	handled := make(chan struct{})
	stop := runSub(t, b, func(ctx context.Context, ev trigger.Event) error {
		if calls.Add(1) == 1 {
			return errors.New("not yet")
		}
		close(handled)
		return nil
	})
	defer stop()
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-1")); err != nil {
		t.Fatal(err)
	}
	// After the failure the subscriber sleeps on a timer for the delay.
	if err := clk.AwaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute - time.Second)
	if n := calls.Load(); n != 1 {
		t.Fatalf("delivered %d times before the delay passed, want 1", n)
	}
	if clk.Timers() != 1 {
		t.Fatalf("the subscriber's timer fired early")
	}
	clk.Advance(time.Second)
	select {
	case <-handled:
	case <-ctx.Done():
		t.Fatal("not delivered again after the delay")
	}
	eventually(t, "the bus to empty", func() bool { return b.Len() == 0 })
}

func TestMemoryBusMaxDeliveries(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var logs bytes.Buffer
	var logMu sync.Mutex
	b := &trigger.MemoryBus{
		RedeliveryDelay: time.Millisecond,
		MaxDeliveries:   3,
		Logger:          slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil)),
	}
	var calls atomic.Int32
	stop := runSub(t, b, func(ctx context.Context, ev trigger.Event) error {
		calls.Add(1)
		return errors.New("always")
	})
	defer stop()
	if err := b.Publish(context.Background(), triggertest.NewEvent("t1", "ev-poison")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the event to be dropped", func() bool { return b.Len() == 0 })
	if n := calls.Load(); n != 3 {
		t.Errorf("delivered %d times, want MaxDeliveries = 3", n)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if s := logs.String(); !strings.Contains(s, "dropping") || !strings.Contains(s, "ev-poison") {
		t.Errorf("the drop was not logged: %q", s)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestMemoryBusCapacity(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := &trigger.MemoryBus{Capacity: 2}
	ctx := context.Background()
	for i := range 2 {
		if err := b.Publish(ctx, trigger.Event{ID: fmt.Sprint(i), TenantID: "t1", Type: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Publish(short, trigger.Event{ID: "full", TenantID: "t1", Type: "x"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Publish to a full bus: %v, want context.DeadlineExceeded", err)
	}
	published := make(chan error, 1)
	go func() { published <- b.Publish(ctx, trigger.Event{ID: "2", TenantID: "t1", Type: "x"}) }()
	var mu sync.Mutex
	var got []string
	stop := runSub(t, b, func(ctx context.Context, ev trigger.Event) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, ev.ID)
		return nil
	})
	defer stop()
	if err := <-published; err != nil {
		t.Fatalf("Publish waiting for room: %v", err)
	}
	eventually(t, "3 events", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("delivered %v, want 0 1 2 in order", got)
	}
}

func TestMemoryBusPanickingHandler(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := &trigger.MemoryBus{RedeliveryDelay: time.Millisecond}
	var calls atomic.Int32
	stop := runSub(t, b, func(ctx context.Context, ev trigger.Event) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	})
	defer stop()
	if err := b.Publish(context.Background(), triggertest.NewEvent("t1", "ev-1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the event handled after the panic", func() bool { return b.Len() == 0 })
	if n := calls.Load(); n != 2 {
		t.Errorf("delivered %d times, want 2", n)
	}
}

// A delivery interrupted by its subscriber's end does not count towards
// MaxDeliveries: with MaxDeliveries 1, the event still reaches the next.
func TestMemoryBusInterruptedNotCounted(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := &trigger.MemoryBus{MaxDeliveries: 1}
	holding := make(chan struct{})
	stopFirst := runSub(t, b, func(ctx context.Context, ev trigger.Event) error {
		close(holding)
		<-ctx.Done()
		return ctx.Err()
	})
	if err := b.Publish(context.Background(), triggertest.NewEvent("t1", "ev-1")); err != nil {
		t.Fatal(err)
	}
	<-holding
	stopFirst()
	got := make(chan string, 1)
	stop := runSub(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- ev.ID
		return nil
	})
	defer stop()
	select {
	case id := <-got:
		if id != "ev-1" {
			t.Errorf("got %q", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupted event was not delivered again")
	}
}

// A handler that changes the Data it is given changes nothing for the
// next delivery.
func TestMemoryBusHandlerMutation(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := &trigger.MemoryBus{RedeliveryDelay: time.Millisecond}
	seen := make(chan any, 2)
	var calls atomic.Int32
	stop := runSub(t, b, func(ctx context.Context, ev trigger.Event) error {
		seen <- ev.Data["k"]
		if calls.Add(1) == 1 {
			ev.Data["k"] = "changed"
			return errors.New("again")
		}
		return nil
	})
	defer stop()
	if err := b.Publish(context.Background(), trigger.Event{ID: "e", TenantID: "t", Type: "x", Data: map[string]any{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case v := <-seen:
			if v != "v" {
				t.Errorf("delivered Data k = %v, want v", v)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("not delivered twice")
		}
	}
}

func TestMemoryBusNilHandler(t *testing.T) {
	if err := new(trigger.MemoryBus).Subscribe(context.Background(), nil); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("Subscribe(nil): %v, want ErrInvalid", err)
	}
}

func TestEncodeEvent(t *testing.T) {
	ev := triggertest.NewEvent("t1", "ev-1")
	b, err := trigger.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	got, err := trigger.DecodeEvent(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != ev.ID || !got.At.Equal(ev.At) || fmt.Sprint(got.Data) != fmt.Sprint(ev.Data) {
		t.Errorf("round trip:\n got  %+v\n want %+v", got, ev)
	}
	for _, bad := range []string{``, `{`, `[]`, `{"id":"x"}`, `{"id":"x","tenant_id":"t","type":"y","data":[1]}`} {
		if _, err := trigger.DecodeEvent([]byte(bad)); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("DecodeEvent(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

func BenchmarkMemoryBusPublishToHandle(b *testing.B) {
	bus := &trigger.MemoryBus{}
	ctx, cancel := context.WithCancel(context.Background())
	handled := make(chan time.Duration, 1)
	done := make(chan error, 1)
	go func() {
		done <- bus.Subscribe(ctx, func(ctx context.Context, ev trigger.Event) error {
			handled <- time.Since(ev.At)
			return nil
		})
	}()
	lat := make([]time.Duration, 0, b.N)
	data := map[string]any{"repo": "valet", "n": 1}
	b.ResetTimer()
	for i := range b.N {
		ev := trigger.Event{ID: fmt.Sprint(i), TenantID: "t1", Source: "bench", Data: data, At: time.Now()}
		if err := bus.Publish(ctx, ev); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, <-handled)
	}
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e3, "p99-µs")
}
