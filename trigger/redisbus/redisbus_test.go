package redisbus_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
	"github.com/valetkit/valet/trigger/triggertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const envVar = "VALET_TEST_REDIS"

func envURL(tb testing.TB) string {
	tb.Helper()
	url := os.Getenv(envVar)
	if url == "" {
		tb.Skip(envVar + " not set; set it to a Redis URL such as redis://127.0.0.1:6379/0 to run the Redis tests")
	}
	return url
}

// client connects to VALET_TEST_REDIS, or skips the test when it is not
// set. It returns a key prefix of the test's own; every key under it is
// deleted, and the client closed, when the test ends.
func client(tb testing.TB) (*redis.Client, string) {
	tb.Helper()
	url := envURL(tb)
	opts, err := redis.ParseURL(url)
	if err != nil {
		tb.Fatalf("%s=%q: %v", envVar, url, err)
	}
	rdb := redis.NewClient(opts)
	prefix := "valettest:" + rand.Text()[:12] + ":"
	tb.Cleanup(func() {
		defer rdb.Close()
		if err := deleteKeys(rdb, prefix); err != nil {
			tb.Errorf("cleaning up %s*: %v", prefix, err)
		}
	})
	return rdb, prefix
}

func deleteKeys(rdb *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+"*", 500).Iterator() // the prefix has no glob characters
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	return rdb.Del(ctx, keys...).Err()
}

func newBus(tb testing.TB, rdb redis.UniversalClient, cfg redisbus.Config) *redisbus.Bus {
	tb.Helper()
	b, err := redisbus.New(rdb, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestBus(t *testing.T) {
	envURL(t)
	triggertest.RunBus(t, func(t *testing.T) trigger.EventBus {
		rdb, prefix := client(t)
		return newBus(t, rdb, redisbus.Config{
			Stream:    prefix + "events",
			ClaimIdle: time.Second,
			Block:     100 * time.Millisecond,
		})
	})
}

// logBuffer collects a logger's records.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// run runs b.Subscribe(h) in a goroutine; stop cancels it and waits for
// it to return, checking that it returned nil. The test's end stops it.
func run(t *testing.T, b *redisbus.Bus, h trigger.EventHandler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Subscribe(ctx, h) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Subscribe: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Errorf("Subscribe did not return 10s after its ctx ended")
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
		time.Sleep(5 * time.Millisecond)
	}
}

func pendingOf(t *testing.T, rdb *redis.Client, stream, group string) int64 {
	t.Helper()
	p, err := rdb.XPending(context.Background(), stream, group).Result()
	if err != nil {
		t.Fatalf("XPENDING: %v", err)
	}
	return p.Count
}

func TestKilledConsumer(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	cfg := redisbus.Config{Stream: prefix + "events", ClaimIdle: 200 * time.Millisecond, Block: 50 * time.Millisecond}
	cfg.Consumer = "doomed"
	a := newBus(t, rdb, cfg)
	cfg.Consumer = "survivor"
	b := newBus(t, rdb, cfg)

	holding := make(chan time.Time, 1)
	stopA := run(t, a, func(ctx context.Context, ev trigger.Event) error {
		holding <- time.Now()
		<-ctx.Done() // never acknowledges
		return ctx.Err()
	})
	ev := triggertest.NewEvent("t1", "ev-1")
	if err := a.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	var heldAt time.Time
	select {
	case heldAt = <-holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the first consumer never got the event")
	}
	stopA()
	if n := pendingOf(t, rdb, cfg.Stream, redisbus.DefaultGroup); n != 1 {
		t.Fatalf("after the consumer died, %d entries pending, want 1", n)
	}

	got := make(chan trigger.Event, 1)
	run(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- ev
		return nil
	})
	select {
	case e := <-got:
		if e.ID != ev.ID {
			t.Fatalf("got %q", e.ID)
		}
		if waited := time.Since(heldAt); waited < cfg.ClaimIdle {
			t.Errorf("claimed %v after the first delivery, before ClaimIdle (%v)", waited, cfg.ClaimIdle)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the dead consumer's entry never reached the other")
	}
	eventually(t, "the entry acknowledged", func() bool {
		return pendingOf(t, rdb, cfg.Stream, redisbus.DefaultGroup) == 0
	})
}

func TestMaxLen(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	b := newBus(t, rdb, redisbus.Config{Stream: prefix + "events", MaxLen: 10})
	const n = 1000
	for i := range n {
		if err := b.Publish(ctx, trigger.Event{ID: fmt.Sprint(i), TenantID: "t1", Type: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := rdb.XLen(ctx, prefix+"events").Result()
	if err != nil {
		t.Fatal(err)
	}
	// MAXLEN ~ trims whole nodes (stream-node-max-entries, 100 by
	// default), so the stream is a little longer than MaxLen.
	if l < 10 || l > 300 {
		t.Errorf("after %d events with MaxLen 10 the stream holds %d", n, l)
	}
	// The newest survive.
	last, err := rdb.XRevRangeN(ctx, prefix+"events", "+", "-", 1).Result()
	if err != nil || len(last) != 1 || !strings.Contains(fmt.Sprint(last[0].Values), `"id":"999"`) {
		t.Errorf("newest entry: %v, %v", last, err)
	}
}

// An entry trimmed while pending is lost, and the claim that finds it
// gone says so.
func TestTrimmedWhilePending(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	stream := prefix + "events"
	var logs logBuffer
	cfg := redisbus.Config{Stream: stream, ClaimIdle: 50 * time.Millisecond, Block: 10 * time.Millisecond, Logger: logs.logger()}
	b := newBus(t, rdb, cfg)
	holding := make(chan struct{}, 1)
	stop := run(t, b, func(ctx context.Context, ev trigger.Event) error {
		holding <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-1")); err != nil {
		t.Fatal(err)
	}
	<-holding
	stop()
	if err := rdb.XTrimMaxLen(ctx, stream, 0).Err(); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	run(t, newBus(t, rdb, cfg), func(ctx context.Context, ev trigger.Event) error {
		calls.Add(1)
		return nil
	})
	eventually(t, "the loss logged", func() bool { return strings.Contains(logs.String(), "trimmed") })
	if n := calls.Load(); n != 0 {
		t.Errorf("a trimmed entry was handled %d times", n)
	}
	if n := pendingOf(t, rdb, stream, redisbus.DefaultGroup); n != 0 {
		t.Errorf("%d entries still pending", n)
	}
}

func TestPoisonEntries(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	var logs logBuffer
	stream := prefix + "events"
	b := newBus(t, rdb, redisbus.Config{Stream: stream, Block: 50 * time.Millisecond, Logger: logs.logger()})
	for _, values := range [][]any{
		{"foo", "bar"},
		{"event", "{not json"},
		{"event", `{"id":"x"}`},                 // no tenant, no source
		{"event", `{"id":"x","tenant_id":"t"}`}, // no source
	} {
		if err := rdb.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: values}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-good")); err != nil {
		t.Fatal(err)
	}
	var handled []string
	var mu sync.Mutex
	run(t, b, func(ctx context.Context, ev trigger.Event) error {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, ev.ID)
		return nil
	})
	eventually(t, "the good event handled and 4 dead entries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n, err := rdb.XLen(ctx, b.DeadStream()).Result()
		return err == nil && n == 4 && len(handled) == 1
	})
	mu.Lock()
	if !slices.Equal(handled, []string{"ev-good"}) {
		t.Errorf("handled %v, want only ev-good", handled)
	}
	mu.Unlock()
	eventually(t, "nothing pending", func() bool { return pendingOf(t, rdb, stream, redisbus.DefaultGroup) == 0 })
	dead, err := rdb.XRange(ctx, b.DeadStream(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dead {
		if !strings.Contains(fmt.Sprint(d.Values["reason"]), "malformed") || d.Values["entry"] == nil {
			t.Errorf("dead entry %v lacks its reason or entry id", d.Values)
		}
	}
	if s := logs.String(); strings.Count(s, "moved an entry to the dead stream") != 4 {
		t.Errorf("dead entries not logged:\n%s", s)
	}
}

func TestMaxDeliveries(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	b := newBus(t, rdb, redisbus.Config{
		Stream: prefix + "events", ClaimIdle: 20 * time.Millisecond, Block: 10 * time.Millisecond, MaxDeliveries: 3,
	})
	var calls atomic.Int32
	run(t, b, func(ctx context.Context, ev trigger.Event) error {
		calls.Add(1)
		return errors.New("always")
	})
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-poison")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the entry in the dead stream", func() bool {
		n, err := rdb.XLen(ctx, b.DeadStream()).Result()
		return err == nil && n == 1
	})
	if n := calls.Load(); n != 3 {
		t.Errorf("handled %d times, want MaxDeliveries = 3", n)
	}
	if n := pendingOf(t, rdb, prefix+"events", redisbus.DefaultGroup); n != 0 {
		t.Errorf("%d entries pending after the entry died", n)
	}
	dead, err := rdb.XRange(ctx, b.DeadStream(), "-", "+").Result()
	if err != nil || len(dead) != 1 {
		t.Fatal(dead, err)
	}
	ev, err := trigger.DecodeEvent([]byte(fmt.Sprint(dead[0].Values["event"])))
	if err != nil || ev.ID != "ev-poison" || dead[0].Values["deliveries"] != "3" {
		t.Errorf("dead entry %v: %v", dead[0].Values, err)
	}
}

func TestUnreachable(t *testing.T) {
	const password = "s3cret-pa55"
	rdb := redis.NewClient(&redis.Options{
		Addr: "127.0.0.1:1", Password: password, DialTimeout: 200 * time.Millisecond, MaxRetries: -1,
	})
	defer rdb.Close()
	var logs logBuffer
	b := newBus(t, rdb, redisbus.Config{Logger: logs.logger()})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-1"))
	if err == nil {
		t.Fatal("Publish to an unreachable Redis succeeded")
	}
	if errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("Publish: %v is ErrInvalid", err)
	}
	if !strings.HasPrefix(err.Error(), "redisbus: publish") {
		t.Errorf("Publish error %q does not say where it comes from", err)
	}
	if strings.Contains(err.Error(), password) {
		t.Errorf("Publish error leaks the password: %v", err)
	}

	sctx, scancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer scancel()
	start := time.Now()
	if err := b.Subscribe(sctx, func(context.Context, trigger.Event) error { return nil }); err != nil {
		t.Errorf("Subscribe to an unreachable Redis: %v, want nil when its ctx ends", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Subscribe returned %v after it started, its ctx ending after 700ms", d)
	}
	s := logs.String()
	// Backoff from 100ms: 100+200+400 ≥ 700ms, so 3 or 4 retries.
	if n := strings.Count(s, "retrying"); n == 0 || n > 6 {
		t.Errorf("Subscribe logged %d retries in 700ms, want a few (not spinning):\n%s", n, s)
	}
	if strings.Contains(s, password) {
		t.Errorf("the log leaks the password:\n%s", s)
	}
}

func TestWrongType(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	stream := prefix + "events"
	if err := rdb.Set(ctx, stream, "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newBus(t, rdb, redisbus.Config{Stream: stream})
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-1")); err == nil || !redis.HasErrorPrefix(err, "WRONGTYPE") {
		t.Errorf("Publish to a string key: %v, want WRONGTYPE", err)
	}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := b.Subscribe(sctx, func(context.Context, trigger.Event) error { return nil })
	if err == nil || !redis.HasErrorPrefix(err, "WRONGTYPE") || sctx.Err() != nil {
		t.Errorf("Subscribe on a string key: %v, want WRONGTYPE at once", err)
	}
}

// The group deleted under a running Subscribe is created again.
func TestGroupDeleted(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	stream := prefix + "events"
	b := newBus(t, rdb, redisbus.Config{Stream: stream, Block: 20 * time.Millisecond})
	got := make(chan string, 10)
	run(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- ev.ID
		return nil
	})
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-1")); err != nil {
		t.Fatal(err)
	}
	if id := <-got; id != "ev-1" {
		t.Fatal(id)
	}
	if err := rdb.XGroupDestroy(ctx, stream, redisbus.DefaultGroup).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-2")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case id := <-got:
			if id == "ev-2" {
				return
			}
		case <-deadline:
			t.Fatal("no event handled after the group was deleted")
		}
	}
}

// A consumer with nothing pending leaves the group when its last
// Subscribe returns; one with pending entries stays, to keep them.
func TestConsumerRemoved(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	stream := prefix + "events"
	b := newBus(t, rdb, redisbus.Config{Stream: stream, Block: 20 * time.Millisecond})
	got := make(chan struct{}, 1)
	stop := run(t, b, func(ctx context.Context, ev trigger.Event) error {
		got <- struct{}{}
		return nil
	})
	if err := b.Publish(ctx, triggertest.NewEvent("t1", "ev-1")); err != nil {
		t.Fatal(err)
	}
	<-got
	consumers := func() []string {
		cs, err := rdb.XInfoConsumers(ctx, stream, redisbus.DefaultGroup).Result()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range cs {
			names = append(names, c.Name)
		}
		return names
	}
	if c := consumers(); !slices.Contains(c, b.Consumer()) {
		t.Fatalf("consumers %v lack %q while it runs", c, b.Consumer())
	}
	stop()
	if c := consumers(); slices.Contains(c, b.Consumer()) {
		t.Errorf("consumers %v still hold %q after it stopped with nothing pending", c, b.Consumer())
	}
}

func TestNew(t *testing.T) {
	if _, err := redisbus.New(nil, redisbus.Config{}); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, cfg := range []redisbus.Config{
		{MaxLen: -1}, {ClaimIdle: -time.Second}, {ClaimIdle: time.Microsecond},
		{Block: -1}, {Block: time.Microsecond}, {Count: -1}, {MaxDeliveries: -1},
	} {
		if _, err := redisbus.New(rdb, cfg); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("New(%+v): %v, want ErrInvalid", cfg, err)
		}
	}
	a := newBus(t, rdb, redisbus.Config{})
	b := newBus(t, rdb, redisbus.Config{})
	if a.Consumer() == "" || a.Consumer() == b.Consumer() {
		t.Errorf("default consumers %q and %q are not unique", a.Consumer(), b.Consumer())
	}
	if a.DeadStream() != redisbus.DefaultStream+redisbus.DeadSuffix {
		t.Errorf("DeadStream() = %q", a.DeadStream())
	}
	if err := a.Subscribe(context.Background(), nil); !errors.Is(err, trigger.ErrInvalid) {
		t.Errorf("Subscribe(nil): %v", err)
	}
}

// BenchmarkPublishToHandle measures the time from Publish to the
// handler, one event at a time: p50 and p99 in microseconds.
func BenchmarkPublishToHandle(b *testing.B) {
	rdb, prefix := client(b)
	bus := newBus(b, rdb, redisbus.Config{Stream: prefix + "events"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	handled := make(chan time.Duration, 1)
	done := make(chan error, 1)
	go func() {
		done <- bus.Subscribe(ctx, func(ctx context.Context, ev trigger.Event) error {
			handled <- time.Since(ev.At)
			return nil
		})
	}()
	// Let the group exist before timing.
	if err := bus.Publish(ctx, trigger.Event{ID: "warm", TenantID: "t1", Type: "x", At: time.Now()}); err != nil {
		b.Fatal(err)
	}
	<-handled
	data := map[string]any{"repo": map[string]any{"name": "valet"}, "n": 1}
	lat := make([]time.Duration, 0, b.N)
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
