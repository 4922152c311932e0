package trigger_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/trigger"
)

// notes records notifications; fail makes the first n calls fail.
type notes struct {
	mu   sync.Mutex
	got  []trigger.Notification
	fail int
}

func (n *notes) Notify(ctx context.Context, note trigger.Notification) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fail > 0 {
		n.fail--
		return errors.New("chat API down")
	}
	n.got = append(n.got, note)
	return nil
}

func (n *notes) all() []trigger.Notification {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]trigger.Notification(nil), n.got...)
}

func TestRouteNotify(t *testing.T) {
	chat := &notes{fail: 1}
	h := newHarness(t, trigger.Config{Notifiers: map[string]trigger.Notifier{"chat": chat}})
	task := scheduleTask("t1", "digest", trigger.Schedule{Cron: "0 9 * * *"})
	task.Output = trigger.Output{Channel: "chat", Target: "+33600000000"}
	h.create(t, task)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "the run", h.finished(t, "t1", "digest", 1, trigger.RunSucceeded))
	// The notifier failed once: the engine waits a second, then tries
	// again. Move the clock on until it has.
	waitFor(t, "the notification", func() bool {
		if len(chat.all()) == 1 {
			return true
		}
		h.clk.Advance(100 * time.Millisecond)
		return false
	})
	n := chat.all()[0]
	r := h.runs(t, "t1", "digest")[0]
	if n.Kind != trigger.NotifyResult || n.Text != r.Result || n.RunID != r.ID || n.Target != "+33600000000" ||
		n.TenantID != "t1" || n.TaskName != "task digest" ||
		n.IdempotencyKey != trigger.NotificationKey(r.ID, trigger.NotifyResult) {
		t.Fatalf("notification %+v for run %+v", n, r)
	}
	if r.RouteError != "" {
		t.Fatalf("a notification delivered on its second try left %q", r.RouteError)
	}
}

func TestRouteNotifierKeepsFailing(t *testing.T) {
	chat := &notes{fail: 100}
	h := newHarness(t, trigger.Config{Notifiers: map[string]trigger.Notifier{"chat": chat}})
	task := scheduleTask("t1", "digest", trigger.Schedule{Every: time.Hour})
	task.Output = trigger.Output{Channel: "chat"}
	h.create(t, task)
	done := make(chan trigger.Run, 1)
	go func() {
		r, err := h.e.RunNow(context.Background(), "t1", "digest")
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		if err := h.clk.AwaitTimers(ctx, 1); err != nil {
			t.Fatal(err)
		}
		h.clk.Advance(d)
	}
	r := <-done
	if r.Status != trigger.RunSucceeded {
		t.Fatalf("a failing notifier changed the run: %+v", r)
	}
	stored := h.runs(t, "t1", "digest")[0]
	if stored.Status != trigger.RunSucceeded || stored.Result != r.Result ||
		!strings.Contains(stored.RouteError, "failed 3 times") || !strings.Contains(stored.RouteError, "chat API down") {
		t.Fatalf("stored run %+v", stored)
	}
}

func TestRouteMemory(t *testing.T) {
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, trigger.Config{Memory: mem})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "The flight to Lisbon costs 212 euros"}, nil
	})
	task := scheduleTask("t1", "fares", trigger.Schedule{Every: time.Hour})
	task.Route = trigger.Route{Kind: trigger.RouteMemory}
	h.create(t, task)
	if _, err := h.e.RunNow(context.Background(), "t1", "fares"); err != nil {
		t.Fatal(err)
	}
	items, err := mem.Recall(context.Background(), "t1", "Lisbon flight", memory.Budget{MaxTokens: 500, MaxEntries: 5})
	if err != nil {
		t.Fatal(err)
	}
	// A triggered run wrote it: its origin says so, and recall shows it
	// as such, not as a fact about the user.
	if len(items) != 1 || items[0].Source.TaskID != "fares" || !strings.Contains(items[0].Text, "212 euros") || items[0].Origin != memory.OriginTrigger {
		t.Fatalf("recalled %+v", items)
	}
	if other, _ := mem.Recall(context.Background(), "t2", "Lisbon flight", memory.Budget{MaxTokens: 500, MaxEntries: 5}); len(other) != 0 {
		t.Fatalf("another tenant recalls %+v", other)
	}
}

func TestRouteChain(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "output of " + run.Task.ID}, nil
	})
	fetch := scheduleTask("t1", "fetch", trigger.Schedule{Every: time.Hour})
	fetch.Route = trigger.Route{Kind: trigger.RouteChain, Next: "summarise", PassOutput: true}
	summarise := scheduleTask("t1", "summarise", trigger.Schedule{Cron: "0 0 1 1 *"})
	h.create(t, summarise)
	h.create(t, fetch)
	r, err := h.e.RunNow(context.Background(), "t1", "fetch")
	if err != nil {
		t.Fatal(err)
	}
	runs := h.runs(t, "t1", "summarise")
	if len(runs) != 1 || runs[0].ID != trigger.ChainRunID("summarise", r.ID) || runs[0].Status != trigger.RunSucceeded {
		t.Fatalf("chained runs %+v", runs)
	}
	calls := h.exec.Calls()
	last := calls[len(calls)-1]
	if last.Previous == nil || last.Previous.Output != "output of fetch" || last.Previous.TaskID != "fetch" || last.Previous.Depth != 1 {
		t.Fatalf("the chained run got %+v", last.Previous)
	}
}

func TestRouteChainLoopStops(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	a := scheduleTask("t1", "a", trigger.Schedule{Every: time.Hour})
	a.Route = trigger.Route{Kind: trigger.RouteChain, Next: "b"}
	b := scheduleTask("t1", "b", trigger.Schedule{Every: time.Hour})
	b.Route = trigger.Route{Kind: trigger.RouteChain, Next: "a"}
	h.create(t, a)
	h.create(t, b)
	if _, err := h.e.RunNow(context.Background(), "t1", "a"); err != nil {
		t.Fatal(err)
	}
	if n := len(h.exec.Calls()); n != 1+trigger.MaxChainDepth {
		t.Fatalf("%d runs in a loop of two chained tasks, want %d", n, 1+trigger.MaxChainDepth)
	}
	var stopped bool
	for _, id := range []string{"a", "b"} {
		for _, r := range h.runs(t, "t1", id) {
			stopped = stopped || strings.Contains(r.RouteError, "a chain of")
		}
	}
	if !stopped {
		t.Fatal("no run says the chain stopped")
	}
}

func TestRouteRefusedAtCreate(t *testing.T) {
	h := newHarness(t, trigger.Config{})
	for name, mod := range map[string]func(*trigger.Task){
		"unknown channel":   func(x *trigger.Task) { x.Output = trigger.Output{Channel: "pager"} },
		"memory, no Memory": func(x *trigger.Task) { x.Route = trigger.Route{Kind: trigger.RouteMemory} },
		"chain to itself":   func(x *trigger.Task) { x.Route = trigger.Route{Kind: trigger.RouteChain, Next: x.ID} },
		"chain, no next":    func(x *trigger.Task) { x.Route = trigger.Route{Kind: trigger.RouteChain} },
		"notify, no output": func(x *trigger.Task) { x.Route = trigger.Route{Kind: trigger.RouteNotify} },
		"unknown kind":      func(x *trigger.Task) { x.Route = trigger.Route{Kind: "email_boss"} },
	} {
		x := scheduleTask("t1", "x", trigger.Schedule{Every: time.Hour})
		mod(x)
		if err := h.e.CreateTask(context.Background(), x); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s: CreateTask = %v, want ErrInvalid", name, err)
		}
	}
}

func TestObserverAndFailureNotice(t *testing.T) {
	chat := &notes{}
	var mu sync.Mutex
	var steps []string
	h := newHarness(t, trigger.Config{
		Notifiers: map[string]trigger.Notifier{"chat": chat},
		Observer: func(l trigger.Lifecycle) {
			mu.Lock()
			steps = append(steps, string(l.Kind)+":"+l.TaskID)
			mu.Unlock()
		},
	})
	h.exec.setFn(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if run.Task.ID == "bad" {
			return trigger.ExecResult{}, errors.New("inbox unreachable")
		}
		return trigger.ExecResult{Result: "ok", BudgetWarning: true}, nil
	})
	good := scheduleTask("t1", "good", trigger.Schedule{Cron: "0 9 * * *"})
	bad := scheduleTask("t1", "bad", trigger.Schedule{Cron: "0 10 * * *"})
	bad.Output = trigger.Output{Channel: "chat"}
	bad.Retry = trigger.Retry{MaxAttempts: 1}
	h.create(t, good)
	h.create(t, bad)
	h.start()
	h.advanceTo(t, at(1, 9, 0))
	waitFor(t, "good ran", h.finished(t, "t1", "good", 1, trigger.RunSucceeded))
	h.advanceTo(t, at(1, 10, 0))
	waitFor(t, "bad DEAD", h.finished(t, "t1", "bad", 1, trigger.RunDead))
	waitFor(t, "the failure notice", func() bool { return len(chat.all()) == 1 })
	if n := chat.all()[0]; n.Kind != trigger.NotifyFailure || !strings.Contains(n.Text, "inbox unreachable") {
		t.Fatalf("notice %+v", n)
	}
	want := []string{"scheduled:good", "scheduled:bad", "started:good", "budget_warning:good", "completed:good",
		"scheduled:good", "started:bad", "dead:bad"}
	waitFor(t, "the observer", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(steps) >= len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(steps, " ") != strings.Join(want, " ") {
		t.Fatalf("observer heard\n%v\nwant\n%v", steps, want)
	}
}

// A slow observer never holds a run up.
func TestObserverNeverBlocks(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	h := newHarness(t, trigger.Config{Observer: func(trigger.Lifecycle) { <-block }})
	h.create(t, scheduleTask("t1", "x", trigger.Schedule{Every: time.Hour}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			if _, err := h.e.RunNow(context.Background(), "t1", "x"); err != nil {
				t.Error(err)
			}
			h.clk.Advance(time.Second) // a new run id
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("runs wait for a blocked observer")
	}
}
