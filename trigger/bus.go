package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"
)

// Defaults of a MemoryBus whose fields are zero.
const (
	// DefaultBusCapacity is how many events a MemoryBus holds — queued,
	// being handled or waiting to be retried — before Publish blocks.
	DefaultBusCapacity = 1024
	// DefaultRedeliveryDelay is how long a MemoryBus waits before it
	// delivers again an event whose handler failed.
	DefaultRedeliveryDelay = time.Second
	// DefaultMaxDeliveries is how many times a bus delivers an event
	// whose handler keeps failing before it gives up on it.
	DefaultMaxDeliveries = 10
)

// EncodeEvent checks ev (errors wrap ErrInvalid) and returns it encoded
// as JSON, for a bus that stores or sends events. An event whose Data
// cannot be encoded (NaN, a channel, a func) or whose encoded Data is
// over MaxEventSize bytes is ErrInvalid. DecodeEvent reverses it.
func EncodeEvent(ev Event) ([]byte, error) {
	data, err := encodeData(ev)
	if err != nil {
		return nil, err
	}
	ev.Data = nil
	b, err := json.Marshal(wireEvent{Event: ev, Data: data})
	if err != nil {
		return nil, fmt.Errorf("%w: event %q: %w", ErrInvalid, ev.ID, err)
	}
	return b, nil
}

// DecodeEvent decodes an event EncodeEvent encoded, and checks it (errors
// wrap ErrInvalid). Numbers in Data come back as float64, objects as
// map[string]any and arrays as []any.
func DecodeEvent(b []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return Event{}, fmt.Errorf("%w: decoding event: %w", ErrInvalid, err)
	}
	if err := ev.Check(); err != nil {
		return Event{}, err
	}
	return ev, nil
}

// wireEvent is an Event with its Data encoded already.
type wireEvent struct {
	Event
	Data json.RawMessage `json:"data,omitempty"`
}

// encodeData checks ev and encodes its Data, nil when it has none.
func encodeData(ev Event) (json.RawMessage, error) {
	if err := ev.Check(); err != nil {
		return nil, err
	}
	if len(ev.Data) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: event %q: data cannot be encoded as JSON: %w", ErrInvalid, ev.ID, err)
	}
	var generic any // whatever types Data held, as JSON reads them
	if err := json.Unmarshal(data, &generic); err != nil {
		return nil, fmt.Errorf("%w: event %q: data: %w", ErrInvalid, ev.ID, err)
	}
	if err := checkData(generic, 0); err != nil {
		return nil, fmt.Errorf("%w: event %q: %w", ErrInvalid, ev.ID, err)
	}
	if len(data) > MaxEventSize {
		return nil, fmt.Errorf("%w: event %q: data is %d bytes of JSON, over MaxEventSize (%d)", ErrInvalid, ev.ID, len(data), MaxEventSize)
	}
	return data, nil
}

// MaxEventDepth is how deeply objects and arrays may nest in an Event's
// Data.
const MaxEventDepth = 32

// checkData refuses Data nested deeper than MaxEventDepth, and strings
// (keys too) holding NUL, which PostgreSQL's jsonb refuses: an event is
// refused at Publish rather than dropped later by one backend.
func checkData(v any, depth int) error {
	if depth > MaxEventDepth {
		return fmt.Errorf("data nests deeper than %d levels", MaxEventDepth)
	}
	switch v := v.(type) {
	case string:
		if strings.IndexByte(v, 0) >= 0 {
			return errors.New("data holds a NUL character")
		}
	case map[string]any:
		for k, x := range v {
			if strings.IndexByte(k, 0) >= 0 {
				return errors.New("data holds a NUL character")
			}
			if err := checkData(x, depth+1); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := checkData(x, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// MemoryBus is an EventBus in process memory: the default, for one
// process, tests and demos. Its zero value is ready to use; set its
// fields before the first call, not after. It is safe for concurrent use.
//
// Publish copies the event (its Data through JSON, so a publisher may
// change its map afterwards, and numbers reach the handler as float64)
// and queues it, blocking while the bus holds Capacity events. Every
// Subscribe call takes events from the one queue, in order, and hands
// each to its handler, one at a time: several Subscribe calls share the
// events like the consumers of a group, each event going to one of them.
// An event whose handler fails is delivered again, to any subscriber,
// after RedeliveryDelay, until MaxDeliveries deliveries have failed;
// then it is dropped and logged. An event whose subscriber's ctx ends
// while its handler runs, and whose handler then fails, goes back to the
// front of the queue at once for another subscriber, and that delivery
// does not count. Events are lost when the process ends.
type MemoryBus struct {
	// Capacity is how many events the bus holds at once — queued, being
	// handled and waiting to be delivered again. Zero:
	// DefaultBusCapacity.
	Capacity int
	// RedeliveryDelay is how long a failed event waits before it is
	// delivered again. Zero: DefaultRedeliveryDelay.
	RedeliveryDelay time.Duration
	// MaxDeliveries is how many deliveries of an event may fail before
	// the bus drops it. Zero: DefaultMaxDeliveries.
	MaxDeliveries int
	// Clock times redeliveries. Nil: clock.System.
	Clock clock.Clock
	// Logger logs the events dropped and the handlers that panicked.
	// Nil: slog.Default().
	Logger *slog.Logger

	mu      sync.Mutex
	queue   []*busEntry   // ready, oldest first
	delayed []*busEntry   // failed, waiting for their readyAt
	held    int           // queued + delayed + being handled
	changed chan struct{} // closed, and dropped, whenever the state changes
}

// busEntry is an event the bus holds.
type busEntry struct {
	ev         Event           // without Data
	data       json.RawMessage // ev's Data, encoded; nil when none
	deliveries int             // counted deliveries so far
	readyAt    time.Time       // when a delayed entry is due
}

var _ EventBus = (*MemoryBus)(nil)

// NewMemoryBus returns an empty MemoryBus with the defaults.
func NewMemoryBus() *MemoryBus { return &MemoryBus{} }

func (b *MemoryBus) capacity() int {
	if b.Capacity <= 0 {
		return DefaultBusCapacity
	}
	return b.Capacity
}

func (b *MemoryBus) delay() time.Duration {
	if b.RedeliveryDelay <= 0 {
		return DefaultRedeliveryDelay
	}
	return b.RedeliveryDelay
}

func (b *MemoryBus) maxDeliveries() int {
	if b.MaxDeliveries <= 0 {
		return DefaultMaxDeliveries
	}
	return b.MaxDeliveries
}

func (b *MemoryBus) clock() clock.Clock {
	if b.Clock == nil {
		return clock.System{}
	}
	return b.Clock
}

func (b *MemoryBus) logger() *slog.Logger {
	if b.Logger == nil {
		return slog.Default()
	}
	return b.Logger
}

// Len returns how many events the bus holds: queued, being handled and
// waiting to be delivered again.
func (b *MemoryBus) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

// broadcast wakes every waiter; the caller holds b.mu.
func (b *MemoryBus) broadcast() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// wait returns a channel closed at the next change; the caller holds b.mu.
func (b *MemoryBus) wait() <-chan struct{} {
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

// Publish implements [EventBus.Publish]. It refuses an invalid event,
// and one whose Data cannot be encoded as JSON or is over MaxEventSize
// encoded (ErrInvalid). While the bus holds Capacity events it waits for
// room, or for ctx to end (ctx.Err()).
func (b *MemoryBus) Publish(ctx context.Context, ev Event) error {
	data, err := encodeData(ev)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ev.Data = nil
	e := &busEntry{ev: ev, data: data}
	for {
		b.mu.Lock()
		if b.held < b.capacity() {
			b.held++
			b.queue = append(b.queue, e)
			b.broadcast()
			b.mu.Unlock()
			return nil
		}
		changed := b.wait()
		b.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Subscribe implements [EventBus.Subscribe]. It hands events to h one at
// a time, in the calling goroutine, and returns nil once ctx has ended
// and the handler under way, if any, has returned; h should return soon
// after its ctx ends. A nil h is ErrInvalid.
func (b *MemoryBus) Subscribe(ctx context.Context, h EventHandler) error {
	if h == nil {
		return fmt.Errorf("%w: Subscribe needs a handler, got nil", ErrInvalid)
	}
	clk := b.clock()
	for {
		if ctx.Err() != nil {
			return nil
		}
		e, changed, next := b.take(clk.Now())
		if e != nil {
			b.deliver(ctx, h, e)
			continue
		}
		var tm Timer
		var due <-chan time.Time
		if !next.IsZero() {
			tm = clk.NewTimer(next.Sub(clk.Now()))
			due = tm.C()
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-due:
		}
		if tm != nil {
			tm.Stop()
		}
	}
}

// take moves the delayed entries due at now to the queue and pops its
// first entry. When there is none, it returns a channel closed at the
// next change, and when the earliest delayed entry is due (zero: none).
func (b *MemoryBus) take(now time.Time) (*busEntry, <-chan struct{}, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var next time.Time
	kept := b.delayed[:0]
	for _, e := range b.delayed {
		if e.readyAt.After(now) {
			kept = append(kept, e)
			if next.IsZero() || e.readyAt.Before(next) {
				next = e.readyAt
			}
			continue
		}
		b.queue = append(b.queue, e)
	}
	clear(b.delayed[len(kept):])
	b.delayed = kept
	if len(b.queue) == 0 {
		return nil, b.wait(), next
	}
	e := b.queue[0]
	b.queue[0] = nil
	b.queue = b.queue[1:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	e.deliveries++
	return e, nil, time.Time{}
}

// deliver hands e to h and settles it by the outcome.
func (b *MemoryBus) deliver(ctx context.Context, h EventHandler, e *busEntry) {
	ev := e.ev
	if e.data != nil {
		// A fresh copy for every delivery: a handler that changes its
		// Data changes nothing for the next one. The bytes came from
		// json.Marshal of a map, so they decode.
		if err := json.Unmarshal(e.data, &ev.Data); err != nil {
			b.settle(e, fmt.Errorf("decoding its data: %w", err), false)
			return
		}
	}
	err := b.call(ctx, h, ev)
	b.settle(e, err, err != nil && ctx.Err() != nil)
}

// call runs h, turning a panic into an error.
func (b *MemoryBus) call(ctx context.Context, h EventHandler, ev Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			b.logger().Error("trigger: event handler panicked", "event", ev.ID, "tenant", ev.TenantID, "panic", r)
			err = fmt.Errorf("event handler panicked: %v", r)
		}
	}()
	return h(ctx, ev)
}

// settle acknowledges e when err is nil, puts it back at the front of
// the queue when its subscriber stopped, and otherwise delays it or, at
// its last delivery, drops it.
func (b *MemoryBus) settle(e *busEntry, err error, interrupted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	defer b.broadcast()
	switch {
	case err == nil:
		b.held--
	case interrupted:
		e.deliveries--
		b.queue = append([]*busEntry{e}, b.queue...)
	case e.deliveries >= b.maxDeliveries():
		b.held--
		b.logger().Error("trigger: dropping an event after its last delivery failed",
			"event", e.ev.ID, "tenant", e.ev.TenantID, "source", e.ev.Source, "type", e.ev.Type,
			"deliveries", e.deliveries, "error", err)
	default:
		e.readyAt = b.clock().Now().Add(b.delay())
		b.delayed = append(b.delayed, e)
	}
}
