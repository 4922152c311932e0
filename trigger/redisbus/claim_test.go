package redisbus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
)

// The first data to claim a Bus's namespace owns its stream: the owner is
// recorded beside the stream (Stream + OwnerSuffix), for good (no TTL);
// the owner claims again as often as it restarts, from any Bus on the
// stream; other data is refused with an ErrInvalid that names the fix.
// Buses on another stream are another namespace's, claimed apart.
func TestClaimNamespaceOwnsTheStream(t *testing.T) {
	rdb, prefix := client(t)
	ctx := context.Background()
	cfg := redisbus.Config{Namespace: "valet/public", Stream: prefix + "events"}
	prod, staging := newBus(t, rdb, cfg), newBus(t, rdb, cfg)
	var _ trigger.NamespaceClaimer = prod
	if got := prod.OwnerKey(); got != prefix+"events"+redisbus.OwnerSuffix {
		t.Fatalf("OwnerKey() = %q, want the stream's name and %q", got, redisbus.OwnerSuffix)
	}
	if err := prod.ClaimNamespace(ctx, "valet/public", "prod-id"); err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if owner, err := rdb.Get(ctx, prod.OwnerKey()).Result(); err != nil || owner != "prod-id" {
		t.Fatalf("owner key holds %q, %v; want prod-id", owner, err)
	}
	if ttl, err := rdb.TTL(ctx, prod.OwnerKey()).Result(); err != nil || ttl >= 0 {
		t.Fatalf("owner key TTL %v, %v; want none", ttl, err)
	}
	for _, b := range []*redisbus.Bus{prod, staging} {
		if err := b.ClaimNamespace(ctx, "valet/public", "prod-id"); err != nil {
			t.Fatalf("the owner claims again: %v", err)
		}
	}
	err := staging.ClaimNamespace(ctx, "valet/public", "staging-id")
	if !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("another database's claim: %v, want ErrInvalid", err)
	}
	for _, want := range []string{`"valet/public"`, "another database", "rivertrigger.Config.Namespace",
		"redisbus.Config.Namespace", prod.OwnerKey()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if owner, _ := rdb.Get(ctx, prod.OwnerKey()).Result(); owner != "prod-id" {
		t.Fatalf("a refused claim changed the owner to %q", owner)
	}
	other := newBus(t, rdb, redisbus.Config{Namespace: "valet/staging", Stream: prefix + "staging:events"})
	if err := other.ClaimNamespace(ctx, "valet/staging", "staging-id"); err != nil {
		t.Fatalf("a stream of its own: %v", err)
	}
	if err := prod.ClaimNamespace(ctx, "valet/public", ""); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("an empty instance id: %v, want ErrInvalid", err)
	}
}

// A claim that cannot reach Redis fails with Redis's error, not a
// refusal: the namespace may well be this data's.
func TestClaimNamespaceUnreachable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	b := newBus(t, rdb, redisbus.Config{Namespace: "valet/public"})
	err := b.ClaimNamespace(context.Background(), "valet/public", "prod-id")
	if err == nil || errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("claim on an unreachable Redis: %v, want Redis's error", err)
	}
}
