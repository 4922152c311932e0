package redispool

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
)

// ring returns a redis.Ring of one shard on VALET_TEST_REDIS: a
// redis.UniversalClient that is not a *redis.Client, as a cluster or
// sharded deployment hands the store. Keys under prefix are deleted when
// the test ends.
func ring(t *testing.T, prefix string) redis.UniversalClient {
	t.Helper()
	opts, err := redis.ParseURL(envURL(t))
	if err != nil {
		t.Fatal(err)
	}
	client(t, prefix) // cleans up prefix
	r := redis.NewRing(&redis.RingOptions{
		Addrs:    map[string]string{"one": opts.Addr},
		DB:       opts.DB,
		Password: opts.Password,
	})
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// TestStoreOnUniversalClient: the Store and the Locker take any
// redis.UniversalClient and pass the conformance suites on one that is
// not a *redis.Client.
func TestStoreOnUniversalClient(t *testing.T) {
	envURL(t)
	t.Run("Store", func(t *testing.T) {
		pooltest.Run(t, func(t *testing.T, maxPerTenant int, retention time.Duration) pool.Store {
			prefix := uniquePrefix()
			s, err := New(ring(t, prefix), Config{Prefix: prefix, MaxPerTenant: maxPerTenant, Retention: retention})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("Locker", func(t *testing.T) {
		pooltest.RunLocker(t, func(t *testing.T) pool.Locker {
			prefix := uniquePrefix()
			l, err := NewLocker(ring(t, prefix), LockerConfig{Prefix: prefix, RetryDelay: 2 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return l
		})
	})
}
