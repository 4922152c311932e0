package trigger_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// logBuffer is an io.Writer safe for the goroutines that log into it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// captureDefaultLog points slog.Default at a buffer until t ends. Tests
// that use it do not run in parallel.
func captureDefaultLog(t *testing.T) *logBuffer {
	t.Helper()
	old := slog.Default()
	b := &logBuffer{}
	slog.SetDefault(slog.New(slog.NewTextHandler(b, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return b
}

// One rule for every valet package: a nil Logger means slog.Default().
// An engine built without one reports a notifier that keeps failing
// there, instead of discarding it.
func TestEngineLogsToSlogDefault(t *testing.T) {
	logs := captureDefaultLog(t)
	down := trigger.NotifierFunc(func(ctx context.Context, n trigger.Notification) error {
		return errors.New("smtp: connection refused")
	})
	h := newHarness(t, trigger.Config{Notifiers: map[string]trigger.Notifier{"email": down}})
	task := scheduleTask("t1", "digest", trigger.Schedule{Every: time.Hour})
	task.Output.Channel = "email"
	task.Route.Kind = trigger.RouteNotify
	h.create(t, task)
	done := make(chan error, 1)
	go func() {
		_, err := h.e.RunNow(context.Background(), "t1", "digest")
		done <- err
	}()
	for range 2 { // the notifier's two retries wait on the clock
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := h.clk.AwaitTimers(ctx, 1); err != nil {
			t.Fatal("no retry timer:", err)
		}
		cancel()
		h.clk.Advance(time.Minute)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "delivering a run's result") || !strings.Contains(got, "smtp: connection refused") {
		t.Fatalf("slog.Default got %q", got)
	}
}

// A MemoryBus without a Logger reports the events it drops to
// slog.Default().
func TestMemoryBusLogsToSlogDefault(t *testing.T) {
	logs := captureDefaultLog(t)
	bus := &trigger.MemoryBus{MaxDeliveries: 1}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- bus.Subscribe(ctx, func(ctx context.Context, ev trigger.Event) error {
			return errors.New("handler refused the event")
		})
	}()
	if err := bus.Publish(ctx, trigger.Event{ID: "e1", TenantID: "t1", Source: "s"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the event to be dropped", func() bool { return bus.Len() == 0 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := logs.String(); !strings.Contains(got, "dropping an event") || !strings.Contains(got, "handler refused the event") {
		t.Fatalf("slog.Default got %q", got)
	}
}
