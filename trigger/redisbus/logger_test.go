package redisbus_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
)

// One rule for every valet package: a nil Logger means slog.Default().
// A Bus without one reports Redis failing there (no Redis needed: the
// address is unreachable). Not parallel: it swaps slog.Default.
func TestNilLoggerIsSlogDefault(t *testing.T) {
	old := slog.Default()
	var logs logBuffer
	slog.SetDefault(logs.logger())
	t.Cleanup(func() { slog.SetDefault(old) })
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	b := newBus(t, rdb, redisbus.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Subscribe(ctx, func(context.Context, trigger.Event) error { return nil }) }()
	eventually(t, "a retry in slog.Default's log", func() bool { return strings.Contains(logs.String(), "Redis failed; retrying") })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
