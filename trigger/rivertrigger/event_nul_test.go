package rivertrigger_test

// Failing tests from the outside review of events and chains on River
// (e5e9aca, 4b598b7).

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// An event's Data goes into the River job's args, a jsonb column, which
// refuses the JSON escape \u0000. A valid event whose payload holds a NUL
// (an email subject, a binary-ish field of a hostile sender) is accepted
// by Publish and never fires: Enqueue fails on every delivery until the
// bus drops it. (The in-memory backend runs it.) Fixed: Publish refuses
// it, on every backend.
func TestEventWithNULNeverFiresOnRiver(t *testing.T) {
	s, _ := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	var calls atomic.Int32
	bus := &trigger.MemoryBus{MaxDeliveries: 1}
	e, err := trigger.New(trigger.Config{
		Store: s, Bus: bus,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
				calls.Add(1)
				return trigger.ExecResult{Result: "seen"}, nil
			})},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	task := &trigger.Task{ID: "mail", TenantID: "alice", Name: "mail",
		Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail"},
		Action:  trigger.Action{Instruction: "summarise it"}}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	// Fixed by refusing such an event at Publish, on every backend: the
	// producer learns of it, rather than the event being dropped later.
	err = e.Publish(ctx, trigger.Event{ID: "msg-1", TenantID: "alice", Source: "gmail",
		Data: map[string]any{"subject": "hi\x00there"}})
	if !errors.Is(err, trigger.ErrInvalid) || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("Publish of an event with a NUL: %v, want ErrInvalid naming the NUL", err)
	}
	if err := e.Publish(ctx, trigger.Event{ID: "msg-2", TenantID: "alice", Source: "gmail",
		Data: map[string]any{"subject": "hi there"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the clean event's run", func() (bool, error) { return calls.Load() == 1, nil })
	if bus.Len() != 0 {
		t.Fatalf("%d events left on the bus", bus.Len())
	}
}
