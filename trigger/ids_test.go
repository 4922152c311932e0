package trigger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/trigger"
)

// The trigger engine takes the same IDs as memory (one limit, MaxIDLen =
// memory.MaxIDLen = 255 bytes): a 256-byte tenant, task or conversation ID
// is refused with ErrInvalid where it enters, instead of a task accepted
// here failing in memory at every run.
func TestIDLimitIsMemorys(t *testing.T) {
	if trigger.MaxIDLen != memory.MaxIDLen {
		t.Fatalf("trigger.MaxIDLen = %d, memory.MaxIDLen = %d", trigger.MaxIDLen, memory.MaxIDLen)
	}
	long := strings.Repeat("x", memory.MaxIDLen+1)
	h := newHarness(t, trigger.Config{})
	ctx := context.Background()
	every := trigger.Schedule{Every: time.Hour}
	for name, task := range map[string]*trigger.Task{
		"task ID":        scheduleTask("t1", long, every),
		"TenantID":       scheduleTask(long, "a", every),
		"ConversationID": func() *trigger.Task { x := scheduleTask("t1", "a", every); x.ConversationID = long; return x }(),
	} {
		if err := h.e.CreateTask(ctx, task); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("CreateTask with a %d-byte %s: %v, want ErrInvalid", len(long), name, err)
		}
	}
	h.create(t, scheduleTask("t1", "a", every))
	calls := map[string]func(tenant, id string) error{
		"Get":    func(tn, id string) error { _, err := h.e.Get(ctx, tn, id); return err },
		"Delete": func(tn, id string) error { return h.e.Delete(ctx, tn, id) },
		"Runs":   func(tn, id string) error { _, err := h.e.Runs(ctx, tn, id, 0); return err },
		"Pause":  func(tn, id string) error { _, err := h.e.Pause(ctx, tn, id); return err },
		"Resume": func(tn, id string) error { _, err := h.e.Resume(ctx, tn, id); return err },
		"Retry":  func(tn, id string) error { _, err := h.e.Retry(ctx, tn, id); return err },
		"RunNow": func(tn, id string) error { _, err := h.e.RunNow(ctx, tn, id); return err },
		"List":   func(tn, _ string) error { _, err := h.e.List(ctx, tn); return err },
		"Publish": func(tn, _ string) error {
			return h.e.Publish(ctx, trigger.Event{ID: "e1", TenantID: tn, Source: "s"})
		},
	}
	for name, call := range calls {
		if err := call(long, "a"); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s with a %d-byte tenant ID: %v, want ErrInvalid", name, len(long), err)
		}
		if name == "List" || name == "Publish" {
			continue
		}
		if err := call("t1", long); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s with a %d-byte task ID: %v, want ErrInvalid", name, len(long), err)
		}
		if err := call("t1", ""); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s with an empty task ID: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := h.e.Get(ctx, "t1", "a"); err != nil {
		t.Fatal("the valid task is gone:", err)
	}
	if n := len(h.exec.Calls()); n != 0 {
		t.Fatalf("%d runs", n)
	}
}

// A task whose IDs are MaxIDLen bytes long runs: its run ids (RunNow's, a
// schedule's, an event's, a chain's) are shortened to fit MaxIDLen too.
func TestLongestIDsRun(t *testing.T) {
	tenant := strings.Repeat("t", trigger.MaxIDLen)
	idA, idB := strings.Repeat("a", trigger.MaxIDLen), strings.Repeat("b", trigger.MaxIDLen)
	h := newHarness(t, trigger.Config{})
	a := scheduleTask(tenant, idA, trigger.Schedule{Every: time.Hour})
	a.ConversationID = strings.Repeat("c", trigger.MaxIDLen)
	a.Route = trigger.Route{Kind: trigger.RouteChain, Next: idB}
	b := eventTask(tenant, idB, trigger.Trigger{Source: "s"})
	a.Name, b.Name = "a", "b"
	h.create(t, b)
	h.create(t, a)
	ctx := context.Background()
	r, err := h.e.RunNow(ctx, tenant, idA)
	if err != nil || r.Status != trigger.RunSucceeded || len(r.ID) > trigger.MaxIDLen {
		t.Fatalf("RunNow: %+v, %v", r, err)
	}
	waitFor(t, "the chained run", func() bool {
		runs, err := h.e.Runs(ctx, tenant, idB, 0)
		return err == nil && len(runs) == 1 && runs[0].Status == trigger.RunSucceeded
	})
	h.start()
	h.advanceTo(t, engineBase.Add(time.Hour))
	waitFor(t, "the scheduled run", h.finished(t, tenant, idA, 2, trigger.RunSucceeded))
	if err := h.e.Publish(ctx, trigger.Event{ID: strings.Repeat("e", trigger.MaxIDLen), TenantID: tenant, Source: "s"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event run", func() bool {
		runs, err := h.e.Runs(ctx, tenant, idB, 0)
		return err == nil && len(runs) >= 2 && runs[0].Status == trigger.RunSucceeded
	})
	for _, id := range []string{idA, idB} {
		for _, r := range h.runs(t, tenant, id) {
			if len(r.ID) > trigger.MaxIDLen || r.Check() != nil {
				t.Errorf("run id of %d bytes: %v", len(r.ID), r.Check())
			}
		}
	}
}
