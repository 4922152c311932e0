package redisbus_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
)

// A webhook publishes an event; a worker, maybe in another process,
// handles it. (This example needs a Redis server, so it is compiled but
// not run by go test.)
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	bus, err := redisbus.New(rdb, redisbus.Config{
		ClaimIdle: 30 * time.Second, // handlers finish well within it
		Logger:    slog.Default(),
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	err = bus.Publish(ctx, trigger.Event{
		ID:       "gmail-18c2f9a1",
		TenantID: "acme",
		Source:   "gmail",
		Type:     "message.received",
		Data:     map[string]any{"from": "alice@example.com", "labels": []any{"INBOX"}},
	})
	if errors.Is(err, trigger.ErrInvalid) {
		log.Fatal(err) // the event itself is wrong
	} else if err != nil {
		log.Fatal(err) // Redis is down: retry or report
	}

	err = bus.Subscribe(ctx, func(ctx context.Context, ev trigger.Event) error {
		// Idempotent by ev.ID: the event may come again.
		fmt.Println(ev.TenantID, ev.Source, ev.Type, ev.Data["from"])
		cancel() // one is enough for the example
		return nil
	})
	if err != nil {
		log.Fatal(err) // Redis refuses for good (WRONGTYPE, NOPERM)
	}
}
