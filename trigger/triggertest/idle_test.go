package triggertest_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/triggertest"
)

// seven is Monday 2 March 2026, 07:00 UTC.
var seven = time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC)

// inbox is a Notifier that keeps what it is told.
type inbox struct {
	mu    sync.Mutex
	notes []trigger.Notification
}

func (b *inbox) Notify(_ context.Context, n trigger.Notification) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.notes = append(b.notes, n)
	return nil
}

func (b *inbox) texts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, n := range b.notes {
		out = append(out, n.Text)
	}
	return out
}

// startEngine runs an engine on clk with exec and the inbox on "chat"
// until the test ends.
func startEngine(t *testing.T, clk *clocktest.Clock, exec trigger.ExecutorFunc, box *inbox) *trigger.Engine {
	t.Helper()
	e, err := trigger.New(trigger.Config{
		Clock:     clk,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Notifiers: map[string]trigger.Notifier{"chat": box},
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e
}

func task(id string, tr trigger.Trigger) *trigger.Task {
	return &trigger.Task{
		ID: id, TenantID: "u1", ConversationID: "c1", Name: id,
		Trigger: tr,
		Action:  trigger.Action{Instruction: "do " + id},
		Output:  trigger.Output{Channel: "chat"},
		Retry:   trigger.Retry{MaxAttempts: 2, Backoff: time.Minute},
	}
}

func waitIdle(t *testing.T, e *trigger.Engine) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := triggertest.WaitIdle(ctx, e); err != nil {
		t.Fatal(err)
	}
}

// A daily 08:00 task on the fake clock: the engine is busy while its run
// is under way, and once WaitIdle returns the run is recorded, its
// result delivered and the task due tomorrow at 08:00.
func TestWaitIdleScheduledRun(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(seven)
	started, release := make(chan struct{}), make(chan struct{})
	box := &inbox{}
	e := startEngine(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		close(started)
		<-release
		return trigger.ExecResult{Result: "digest at " + clk.Now().Format("15:04")}, nil
	}, box)
	if err := e.CreateTask(ctx, task("digest", trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 8 * * *", Zone: "UTC"}})); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, e) // nothing due at 07:00
	if err := clk.AwaitTimers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	<-started
	if idle, err := e.Idle(ctx); idle || err != nil {
		t.Fatalf("Idle with a run under way = %v, %v", idle, err)
	}
	close(release)
	waitIdle(t, e)
	if got := box.texts(); len(got) != 1 || got[0] != "digest at 08:00" {
		t.Fatalf("notified %q, want the 08:00 digest once", got)
	}
	runs, err := e.Runs(ctx, "u1", "digest", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || !runs[0].DueAt.Equal(seven.Add(time.Hour)) {
		t.Fatalf("runs %+v, %v", runs, err)
	}
	got, err := e.Get(ctx, "u1", "digest")
	if err != nil || !got.NextRun.Equal(seven.Add(25*time.Hour)) {
		t.Fatalf("NextRun %v, %v; want tomorrow 08:00", got.NextRun, err)
	}
}

// An event published to the in-memory bus, and its run's retry after a
// backoff on the fake clock: WaitIdle returns once the event's run has
// failed and sleeps until the retry's time, and, after the clock reaches
// it, once the retry has run and its result is delivered.
func TestWaitIdleEventAndRetry(t *testing.T) {
	ctx := context.Background()
	clk := clocktest.New(seven)
	box := &inbox{}
	var mu sync.Mutex
	attempts := 0
	e := startEngine(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts++
		if attempts == 1 {
			return trigger.ExecResult{}, errors.New("the mail server is down")
		}
		return trigger.ExecResult{Result: "mail read at " + clk.Now().Format("15:04")}, nil
	}, box)
	if err := e.CreateTask(ctx, task("mail", trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail", Type: "message.received"})); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, e)
	if err := e.Publish(ctx, trigger.Event{ID: "m1", TenantID: "u1", Source: "gmail", Type: "message.received", At: seven}); err != nil {
		t.Fatal(err)
	}
	waitIdle(t, e)
	runs, err := e.Runs(ctx, "u1", "mail", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunFailed {
		t.Fatalf("after the first attempt: runs %+v, %v", runs, err)
	}
	if got := box.texts(); len(got) != 0 {
		t.Fatalf("notified %q before the retry", got)
	}
	clk.Advance(time.Minute) // the backoff ends: the retry is due
	waitIdle(t, e)
	runs, err = e.Runs(ctx, "u1", "mail", 0)
	if err != nil || len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Attempt != 2 {
		t.Fatalf("after the retry: runs %+v, %v", runs, err)
	}
	if got := box.texts(); len(got) != 1 || got[0] != "mail read at 07:01" {
		t.Fatalf("notified %q, want the retry's result once", got)
	}
}

// WaitIdle returns ctx's error while the engine stays busy.
func TestWaitIdleBusy(t *testing.T) {
	clk := clocktest.New(seven)
	release := make(chan struct{})
	defer close(release)
	e := startEngine(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return trigger.ExecResult{}, nil
	}, &inbox{})
	if err := e.Publish(context.Background(), trigger.Event{ID: "m1", TenantID: "u1", Source: "gmail", Type: "message.received", At: seven}); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTask(context.Background(), task("mail", trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail", Type: "message.received"})); err != nil {
		t.Fatal(err)
	}
	if err := e.Publish(context.Background(), trigger.Event{ID: "m2", TenantID: "u1", Source: "gmail", Type: "message.received", At: seven}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := triggertest.WaitIdle(ctx, e); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitIdle with a run blocked = %v, want the deadline", err)
	}
}
