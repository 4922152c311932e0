package rivertrigger_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

const (
	refusalReason = "Your daily spending limit is reached. Please try again tomorrow."
	refusalFigure = "all tenants spent $1300.00 today"
)

// chatLog records the notifications of a channel.
type chatLog struct {
	mu  sync.Mutex
	got []trigger.Notification
}

func (c *chatLog) Notify(ctx context.Context, n trigger.Notification) error {
	c.mu.Lock()
	c.got = append(c.got, n)
	c.mu.Unlock()
	return nil
}

func (c *chatLog) all() []trigger.Notification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]trigger.Notification(nil), c.got...)
}

// refusingEngine starts an engine on s whose executor refuses every run
// (trigger.ErrRefused, as agentexec does for a SpendGuard's refusal),
// counting its calls, with a "chat" channel recorded in chat.
func refusingEngine(t *testing.T, s *rivertrigger.Store, calls *atomic.Int32, chat *chatLog) *trigger.Engine {
	t.Helper()
	e, err := trigger.New(trigger.Config{
		Store: s,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
				calls.Add(1)
				return trigger.ExecResult{Result: refusalReason}, fmt.Errorf("%w: spend limit reached: %s", trigger.ErrRefused, refusalFigure)
			})},
		Notifiers:  map[string]trigger.Notifier{"chat": chat},
		RunTimeout: 20 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return e
}

// checkRefusedRun checks that the task has one run, refused on its first
// attempt, with the user's reason as its result and the figures in its
// error.
func checkRefusedRun(t *testing.T, e *trigger.Engine, tenant, id string) trigger.Run {
	t.Helper()
	runs, err := e.Runs(context.Background(), tenant, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunRefused || runs[0].Attempt != 1 ||
		runs[0].Result != refusalReason || !strings.Contains(runs[0].Error, refusalFigure) {
		t.Fatalf("runs = %+v, want one refused run", runs)
	}
	return runs[0]
}

// On River, a recurring task's refused run completes its job — River
// does not try it again, however many attempts the task allows — and
// the task stays ACTIVE with its next time queued; the channel is told
// the user's reason once.
func TestRefusedRunOnRiverKeepsTheSchedule(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	var calls atomic.Int32
	chat := &chatLog{}
	e := refusingEngine(t, s, &calls, chat)
	ctx := context.Background()
	first := time.Now().Add(300 * time.Millisecond).Truncate(time.Millisecond)
	task := oneTime("alice", "digest", time.Time{})
	task.Trigger.Schedule = trigger.Schedule{Every: time.Hour, Start: first}
	task.Output = trigger.Output{Channel: "chat"}
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Second}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the refused run's job completed, the next one queued", func() (bool, error) {
		st := jobStates(t, pool, "digest")
		return st["completed"] == 1 && st["scheduled"] == 1, nil
	})
	r := checkRefusedRun(t, e, "alice", "digest")
	got, err := e.Get(ctx, "alice", "digest")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != trigger.StatusActive || !got.NextRun.Equal(first.Add(time.Hour)) || !got.LastRun.Equal(r.StartedAt) {
		t.Fatalf("after the refused run the task is %s, next run %s, last run %s; want ACTIVE, next run %s",
			got.Status, got.NextRun, got.LastRun, first.Add(time.Hour))
	}
	if st := jobStates(t, pool, "digest"); len(st) != 2 {
		t.Fatalf("jobs of the task: %v, want the refused run's completed and the next scheduled", st)
	}
	waitFor(t, 10*time.Second, "the refusal notice", func() (bool, error) { return len(chat.all()) == 1, nil })
	if n := chat.all()[0]; n.Kind != trigger.NotifyRefused || n.Text != refusalReason {
		t.Fatalf("notice %+v", n)
	}
	// Its job completed, River makes no further attempt of the run.
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d executions, want 1: the refused run was tried again", n)
	}
}

// On River, a one-time task whose run is refused ends EXPIRED, its job
// completed.
func TestRefusedOneTimeTaskOnRiverExpires(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	var calls atomic.Int32
	e := refusingEngine(t, s, &calls, &chatLog{})
	task := oneTime("alice", "once", time.Now().Add(300*time.Millisecond))
	task.Retry = trigger.Retry{MaxAttempts: 3, Backoff: time.Second}
	if err := e.CreateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the task EXPIRED", statusIs(e, "alice", "once", trigger.StatusExpired))
	checkRefusedRun(t, e, "alice", "once")
	waitFor(t, 10*time.Second, "the job completed", func() (bool, error) {
		st := jobStates(t, pool, "once")
		return st["completed"] == 1 && len(st) == 1, nil
	})
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
}

// On River, an event task whose run is refused stays ACTIVE and its job
// is completed, not retried.
func TestRefusedEventRunOnRiverIsNotRetried(t *testing.T) {
	s, pool := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	var calls atomic.Int32
	e := refusingEngine(t, s, &calls, &chatLog{})
	ctx := context.Background()
	task := &trigger.Task{ID: "hook", TenantID: "alice", Name: "task hook",
		Trigger: trigger.Trigger{Kind: trigger.KindEvent, Type: "push"},
		Action:  trigger.Action{Instruction: "react"},
		Retry:   trigger.Retry{MaxAttempts: 3, Backoff: time.Second}}
	if err := e.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}
	if err := e.Publish(ctx, trigger.Event{ID: "e1", TenantID: "alice", Type: "push"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the event's job completed", func() (bool, error) {
		return jobStates(t, pool, "hook")["completed"] == 1, nil
	})
	checkRefusedRun(t, e, "alice", "hook")
	got, err := e.Get(ctx, "alice", "hook")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != trigger.StatusActive {
		t.Fatalf("after a refused event run the task is %s", got.Status)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d executions, want 1", n)
	}
	if st := jobStates(t, pool, "hook"); st["completed"] != 1 || len(st) != 1 {
		t.Fatalf("jobs of the task: %v, want one completed", st)
	}
}
