package triggertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// NewBus makes an empty bus for one subtest, isolated from every other
// one it makes, cleaning up with t.Cleanup. Subtests run in parallel, so
// it is called concurrently.
type NewBus = func(t *testing.T) trigger.EventBus

// BusWait is how long RunBus waits for something it expects a bus to do:
// deliver an event, deliver again a failed one, give the event of a
// stopped subscriber to another, return from Subscribe once its ctx has
// ended. It never waits for something not to happen.
const BusWait = 20 * time.Second

// RunBus checks that the buses newBus makes behave as [trigger.EventBus]
// documents. Each check is a parallel subtest with a bus of its own.
//
// The suite assumes that:
//
//   - the bus starts empty, and delivers events published before
//     Subscribe is called;
//   - newBus configures it to deliver again well within [BusWait]: a
//     failed event, and one whose subscriber's ctx ended while its
//     handler held it (a bus that claims such events after an idle
//     time, as a Redis consumer group does, should be given a claim
//     time of a second or so — long enough that a quick handler is never
//     taken for a dead one, or the two-subscriber check sees an event
//     handled twice);
//   - Subscribe returns nil within BusWait of its ctx ending, once the
//     handler under way has returned;
//   - Data comes back as encoding/json decodes it: numbers as float64,
//     objects as map[string]any, arrays as []any; At comes back as the
//     same instant.
//
// It allows duplicates wherever at-least-once delivery does (counting
// distinct event IDs), except that two subscribers whose handlers all
// succeed never both handle one event.
func RunBus(t *testing.T, newBus NewBus) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, b trigger.EventBus)
	}{
		{"RoundTrip", testBusRoundTrip},
		{"Copies", testBusCopies},
		{"Many", testBusMany},
		{"Redeliver", testBusRedeliver},
		{"Invalid", testBusInvalid},
		{"SubscribeStops", testBusSubscribeStops},
		{"CancelledPublish", testBusCancelledPublish},
		{"TwoSubscribers", testBusTwoSubscribers},
		{"StoppedSubscriber", testBusStoppedSubscriber},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newBus(t))
		})
	}
}

// NewEvent returns a valid event of tenantID with every field set,
// its Data nested and already as JSON decodes it (numbers float64).
// Tests of an EventBus may use it as a starting point.
func NewEvent(tenantID, id string) trigger.Event {
	return trigger.Event{
		ID:       id,
		TenantID: tenantID,
		Source:   "github",
		Type:     "issue.opened",
		Data: map[string]any{
			"repo":   map[string]any{"name": "valet", "stars": float64(42), "private": false},
			"labels": []any{"bug", "p1", float64(3), nil, map[string]any{"x": "y"}},
			"title":  "<Crash> & \"quotes\" — ünïcödé 🙂",
			"score":  2.5,
			"none":   nil,
		},
		At: base.Add(123456789 * time.Nanosecond),
	}
}

// subscription is one Subscribe call running in a goroutine.
type subscription struct {
	cancel context.CancelFunc
	done   chan error
}

// subscribe runs b.Subscribe(h) in a goroutine until the test ends, or
// until stop is called.
func subscribe(t *testing.T, b trigger.EventBus, h trigger.EventHandler) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &subscription{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- b.Subscribe(ctx, h) }()
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the subscription and waits for Subscribe to return nil.
// It may be called more than once.
func (s *subscription) stop(t *testing.T) {
	t.Helper()
	s.cancel()
	select {
	case err, ok := <-s.done:
		if ok {
			close(s.done)
			if err != nil {
				t.Errorf("Subscribe returned %v after its ctx ended, want nil", err)
			}
		}
	case <-time.After(BusWait):
		t.Errorf("Subscribe did not return within %v of its ctx ending", BusWait)
	}
}

// publish publishes ev or fails the test.
func publish(t *testing.T, b trigger.EventBus, ev trigger.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), BusWait)
	defer cancel()
	if err := b.Publish(ctx, ev); err != nil {
		t.Fatalf("Publish(%q): %v", ev.ID, err)
	}
}

// receive waits for a value on ch, or fails the test.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(BusWait):
		t.Fatalf("waited %v for %s", BusWait, what)
		var zero T
		return zero
	}
}

// sameEvent reports how got differs from want, "" when it does not.
func sameEvent(want, got trigger.Event) string {
	var diffs []string
	if got.ID != want.ID || got.TenantID != want.TenantID || got.Source != want.Source || got.Type != want.Type {
		diffs = append(diffs, fmt.Sprintf("ids: got %q/%q %q %q, want %q/%q %q %q",
			got.TenantID, got.ID, got.Source, got.Type, want.TenantID, want.ID, want.Source, want.Type))
	}
	if !got.At.Equal(want.At) {
		diffs = append(diffs, fmt.Sprintf("At: got %v, want %v", got.At, want.At))
	}
	if len(got.Data) != 0 || len(want.Data) != 0 {
		if !reflect.DeepEqual(got.Data, want.Data) {
			diffs = append(diffs, fmt.Sprintf("Data:\n got  %#v\n want %#v", got.Data, want.Data))
		}
	}
	return strings.Join(diffs, "; ")
}

func testBusRoundTrip(t *testing.T, b trigger.EventBus) {
	full := NewEvent("t1", "ev-full")
	bare := trigger.Event{ID: "ev-bare", TenantID: "t2", Type: "tick"}
	got := make(chan trigger.Event, 10)
	subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- ev
		return nil
	})
	publish(t, b, full)
	publish(t, b, bare)
	seen := map[string]trigger.Event{}
	for len(seen) < 2 {
		ev := receive(t, got, "the events published")
		seen[ev.ID] = ev
	}
	for _, want := range []trigger.Event{full, bare} {
		ev, ok := seen[want.ID]
		if !ok {
			t.Fatalf("event %q not delivered; got %v", want.ID, seen)
		}
		if d := sameEvent(want, ev); d != "" {
			t.Errorf("event %q delivered changed: %s", want.ID, d)
		}
	}
}

func testBusCopies(t *testing.T, b trigger.EventBus) {
	// Published before anyone subscribes, then changed by its publisher.
	ev := NewEvent("t1", "ev-copy")
	ev.Data = map[string]any{"n": 1, "nested": map[string]any{"k": "v"}, "list": []any{"a"}}
	publish(t, b, ev)
	ev.Data["n"] = 2
	ev.Data["nested"].(map[string]any)["k"] = "changed"
	ev.Data["list"].([]any)[0] = "changed"
	ev.Data["added"] = true
	want := ev
	want.Data = map[string]any{"n": float64(1), "nested": map[string]any{"k": "v"}, "list": []any{"a"}}

	got := make(chan trigger.Event, 1)
	subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- ev
		return nil
	})
	if d := sameEvent(want, receive(t, got, "the event")); d != "" {
		t.Errorf("the publisher's changes after Publish reached the handler: %s", d)
	}
}

func testBusMany(t *testing.T, b trigger.EventBus) {
	const publishers, each = 4, 50
	var mu sync.Mutex
	seen := map[string]int{}
	all := make(chan struct{})
	subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		mu.Lock()
		defer mu.Unlock()
		seen[ev.ID]++
		if len(seen) == publishers*each && seen[ev.ID] == 1 {
			close(all)
		}
		return nil
	})
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range each {
				ev := trigger.Event{ID: fmt.Sprintf("ev-%d-%d", p, i), TenantID: "t1", Source: "load",
					Data: map[string]any{"p": p, "i": i}}
				ctx, cancel := context.WithTimeout(context.Background(), BusWait)
				err := b.Publish(ctx, ev)
				cancel()
				if err != nil {
					t.Errorf("Publish(%q): %v", ev.ID, err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-all:
	case <-time.After(BusWait):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("after %v, %d of %d events delivered", BusWait, len(seen), publishers*each)
	}
}

func testBusRedeliver(t *testing.T, b trigger.EventBus) {
	var mu sync.Mutex
	attempts := map[string]int{}
	handled := make(chan string, 10)
	subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		mu.Lock()
		attempts[ev.ID]++
		n := attempts[ev.ID]
		mu.Unlock()
		if ev.ID == "ev-flaky" && n < 3 {
			return fmt.Errorf("failure %d", n)
		}
		handled <- ev.ID
		return nil
	})
	publish(t, b, NewEvent("t1", "ev-flaky"))
	publish(t, b, NewEvent("t1", "ev-steady"))
	done := map[string]bool{}
	for len(done) < 2 {
		done[receive(t, handled, "the failed event delivered again")] = true
	}
	mu.Lock()
	defer mu.Unlock()
	if attempts["ev-flaky"] < 3 {
		t.Errorf("the failing event was handled %d times, want 3", attempts["ev-flaky"])
	}
}

func testBusInvalid(t *testing.T, b trigger.EventBus) {
	ctx, cancel := context.WithTimeout(context.Background(), BusWait)
	defer cancel()
	ok := NewEvent("t1", "ev-ok")
	bad := map[string]trigger.Event{
		"empty":      {},
		"no ID":      {TenantID: "t1", Source: "s"},
		"no tenant":  {ID: "ev-x", Source: "s"},
		"no source":  {ID: "ev-x", TenantID: "t1"},
		"long ID":    {ID: strings.Repeat("x", trigger.MaxIDLen+1), TenantID: "t1", Source: "s"},
		"long type":  {ID: "ev-x", TenantID: "t1", Type: strings.Repeat("x", trigger.MaxIDLen+1)},
		"oversized":  {ID: "ev-x", TenantID: "t1", Source: "s", Data: map[string]any{"s": strings.Repeat("x", trigger.MaxEventSize)}},
		"NaN":        {ID: "ev-x", TenantID: "t1", Source: "s", Data: map[string]any{"n": math.NaN()}},
		"infinity":   {ID: "ev-x", TenantID: "t1", Source: "s", Data: map[string]any{"n": map[string]any{"m": math.Inf(1)}}},
		"channel":    {ID: "ev-x", TenantID: "t1", Source: "s", Data: map[string]any{"c": make(chan int)}},
		"func":       {ID: "ev-x", TenantID: "t1", Source: "s", Data: map[string]any{"f": func() {}}},
		"bad tenant": {ID: "ev-x", TenantID: "t\x00", Source: "s"},
	}
	for name, ev := range bad {
		if err := b.Publish(ctx, ev); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Publish(%s): got %v, want ErrInvalid", name, err)
		}
	}
	// Just under the limit is fine: {"s":"…"} is 8 bytes besides the string.
	fits := trigger.Event{ID: "ev-fits", TenantID: "t1", Source: "s",
		Data: map[string]any{"s": strings.Repeat("x", trigger.MaxEventSize-8)}}
	publish(t, b, fits)
	publish(t, b, ok)
	got := make(chan string, 10)
	subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- ev.ID
		return nil
	})
	seen := map[string]bool{}
	for len(seen) < 2 {
		id := receive(t, got, "the valid events")
		if id != ok.ID && id != fits.ID {
			t.Fatalf("an event refused by Publish was delivered: %q", id)
		}
		seen[id] = true
	}
}

func testBusSubscribeStops(t *testing.T, b trigger.EventBus) {
	// A ctx that has ended already.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		done <- b.Subscribe(ctx, func(context.Context, trigger.Event) error { return nil })
	}()
	if err := receive(t, done, "Subscribe on an ended ctx to return"); err != nil {
		t.Errorf("Subscribe on an ended ctx: %v, want nil", err)
	}

	// Idle, then cancelled.
	s := subscribe(t, b, func(context.Context, trigger.Event) error { return nil })
	s.stop(t)

	// Cancelled while its handler is running; the handler honours ctx.
	started := make(chan struct{}, 1)
	s = subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		select {
		case started <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	})
	publish(t, b, NewEvent("t1", "ev-slow"))
	receive(t, started, "the handler to start")
	s.stop(t)
}

func testBusCancelledPublish(t *testing.T, b trigger.EventBus) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := b.Publish(ctx, NewEvent("t1", "ev-late"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Publish on a cancelled ctx: got %v, want context.Canceled", err)
	}
}

func testBusTwoSubscribers(t *testing.T, b trigger.EventBus) {
	const n = 100
	var mu sync.Mutex
	by := map[string][]int{} // event ID → the subscribers that handled it
	all := make(chan struct{})
	for sub := range 2 {
		subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
			mu.Lock()
			defer mu.Unlock()
			by[ev.ID] = append(by[ev.ID], sub)
			if len(by) == n && len(by[ev.ID]) == 1 {
				close(all)
			}
			return nil
		})
	}
	for i := range n {
		publish(t, b, trigger.Event{ID: fmt.Sprintf("ev-%03d", i), TenantID: "t1", Type: "tick"})
	}
	select {
	case <-all:
	case <-time.After(BusWait):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("after %v, %d of %d events handled", BusWait, len(by), n)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, subs := range by {
		if len(subs) > 1 {
			t.Errorf("event %q handled %d times (by subscribers %v) though no handler failed", id, len(subs), subs)
		}
	}
}

func testBusStoppedSubscriber(t *testing.T, b trigger.EventBus) {
	holding := make(chan string, 10)
	first := subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		holding <- ev.ID
		<-ctx.Done() // holds the event, unacknowledged, until it is stopped
		return ctx.Err()
	})
	ev := NewEvent("t1", "ev-held")
	publish(t, b, ev)
	if id := receive(t, holding, "the first subscriber to get the event"); id != ev.ID {
		t.Fatalf("first subscriber got %q, want %q", id, ev.ID)
	}
	got := make(chan trigger.Event, 10)
	subscribe(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- ev
		return nil
	})
	first.stop(t)
	if d := sameEvent(ev, receive(t, got, "the event of the stopped subscriber to reach the other")); d != "" {
		t.Errorf("the event reached the other subscriber changed: %s", d)
	}
}
