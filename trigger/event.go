package trigger

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// MaxEventSize is the largest Event, its Data encoded as JSON, in bytes.
const MaxEventSize = 256 << 10

// Event is something that happened for a tenant: an email arrived, a
// price changed. Its Data is untrusted: it reaches a model only inside a
// delimited data block.
type Event struct {
	// ID identifies the event at its source; a redelivered event keeps
	// it, and a task runs once per event ID. Required.
	ID string `json:"id"`
	// TenantID is the tenant the event belongs to; it reaches only that
	// tenant's tasks. Required.
	TenantID string `json:"tenant_id"`
	// Source and Type say what happened ("gmail", "message.received").
	// At least one is required.
	Source string `json:"source,omitempty"`
	Type   string `json:"type,omitempty"`
	// Data is the payload, as decoded JSON: strings, float64 or other
	// numbers, bools, nil, []any and map[string]any.
	Data map[string]any `json:"data,omitempty"`
	// At is when it happened. Optional.
	At time.Time `json:"at,omitzero"`
}

// Check reports whether ev is a valid event, wrapping ErrInvalid with
// what is wrong when it is not. It does not measure Data (a bus does,
// against MaxEventSize, when it encodes it).
func (ev Event) Check() error {
	if err := checkID("event ID", ev.ID); err != nil {
		return err
	}
	if err := checkID("event TenantID", ev.TenantID); err != nil {
		return err
	}
	if ev.Source == "" && ev.Type == "" {
		return fmt.Errorf("%w: event %q has no Source or Type", ErrInvalid, ev.ID)
	}
	if err := checkText("event Source", ev.Source, MaxIDLen); err != nil {
		return err
	}
	return checkText("event Type", ev.Type, MaxIDLen)
}

// Matches reports whether ev fires g: g is an event trigger, its Source
// and Type, where set, equal ev's, and each path of its Filter leads
// through ev.Data to a value equal to the filter's. A path that is
// missing, or that goes through something other than an object, does not
// match. A string equals the filter value as it is; a number in its
// shortest decimal form ("3", "2.5"); a bool as "true" or "false"; null
// as "null". Objects and arrays equal nothing. Matches does not check
// tenants: the engine gives a tenant's events to its own tasks only.
func (g Trigger) Matches(ev Event) bool {
	if g.Kind != KindEvent {
		return false
	}
	if (g.Source != "" && g.Source != ev.Source) || (g.Type != "" && g.Type != ev.Type) {
		return false
	}
	for path, want := range g.Filter {
		v, ok := lookup(ev.Data, path)
		if !ok {
			return false
		}
		got, ok := scalarText(v)
		if !ok || got != want {
			return false
		}
	}
	return true
}

// lookup follows a dotted path through nested objects.
func lookup(data map[string]any, path string) (any, bool) {
	var cur any = data
	for seg := range strings.SplitSeq(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// scalarText is the text a filter value compares with.
func scalarText(v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "null", true
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", false
		}
		return strconv.FormatFloat(v, 'f', -1, 64), true
	case float32:
		return scalarText(float64(v))
	case int:
		return strconv.Itoa(v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int32:
		return strconv.FormatInt(int64(v), 10), true
	case uint:
		return strconv.FormatUint(uint64(v), 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case uint32:
		return strconv.FormatUint(uint64(v), 10), true
	}
	return "", false
}

// EventHandler handles one event a bus delivers. An error means the
// event was not handled: the bus delivers it again later.
type EventHandler func(ctx context.Context, ev Event) error

// EventBus carries events from their sources to the engine. Delivery is
// at least once: an event is acknowledged when its handler returns nil,
// and delivered again when the handler fails or the subscriber dies
// first, so a handler must be idempotent by Event.ID (the engine is: it
// uses the ID in the run's id). trigger/triggertest.RunBus is the
// conformance suite of an EventBus.
type EventBus interface {
	// Publish checks ev (ErrInvalid) and hands it to the bus. It returns
	// once the bus holds the event: for a durable bus, once it is stored.
	Publish(ctx context.Context, ev Event) error
	// Subscribe delivers events to h, one at a time or several at once,
	// until ctx ends; then it returns nil. It returns an error when it
	// cannot go on.
	Subscribe(ctx context.Context, h EventHandler) error
}
