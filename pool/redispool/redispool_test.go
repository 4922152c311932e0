package redispool

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
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

	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// client connects to VALET_TEST_REDIS, or skips the test when it is not
// set. The client is closed, and every key under prefix deleted, when the
// test ends.
func client(t *testing.T, prefix string) *redis.Client {
	t.Helper()
	url := envURL(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("VALET_TEST_REDIS=%q: %v", url, err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() {
		defer rdb.Close()
		if err := deleteKeys(rdb, prefix); err != nil {
			t.Errorf("cleaning up %s*: %v", prefix, err)
		}
	})
	return rdb
}

func envURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("VALET_TEST_REDIS")
	if url == "" {
		t.Skip("VALET_TEST_REDIS not set; set it to a Redis URL such as redis://127.0.0.1:6379/0 to run the Redis tests")
	}
	return url
}

// uniquePrefix isolates one test's keys.
func uniquePrefix() string { return "valettest:" + rand.Text()[:12] + ":" }

func deleteKeys(rdb *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := rdb.Scan(ctx, 0, escapeGlob(prefix)+"*", 500).Iterator()
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

// escapeGlob quotes the characters SCAN's MATCH pattern treats specially.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func newStore(t *testing.T, opts Config) *Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = uniquePrefix()
	}
	s, err := New(client(t, opts.Prefix), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	envURL(t)
	pooltest.Run(t, func(t *testing.T, maxPerTenant int, retention time.Duration) pool.Store {
		return newStore(t, Config{MaxPerTenant: maxPerTenant, Retention: retention})
	})
}

func TestLocker(t *testing.T) {
	envURL(t)
	pooltest.RunLocker(t, func(t *testing.T) pool.Locker {
		prefix := uniquePrefix()
		l, err := NewLocker(client(t, prefix), LockerConfig{Prefix: prefix, RetryDelay: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return l
	})
}

// TestNewRejects: New and NewLocker refuse a nil client and a negative
// or too small setting with an error wrapping pool.ErrInvalidConfig, as
// pool.NewMemory refuses the same settings.
func TestNewRejects(t *testing.T) {
	if _, err := New(nil, Config{}); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Errorf("New(nil) = %v, want pool.ErrInvalidConfig", err)
	}
	if _, err := NewLocker(nil, LockerConfig{}); !errors.Is(err, pool.ErrInvalidConfig) {
		t.Errorf("NewLocker(nil) = %v, want pool.ErrInvalidConfig", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, o := range []Config{{MaxPerTenant: -1}, {Retention: -time.Second}, {Retention: time.Microsecond}} {
		if _, err := New(rdb, o); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("New with %+v = %v, want pool.ErrInvalidConfig", o, err)
		}
	}
	for _, o := range []LockerConfig{{Lease: -1}, {RetryDelay: -1}, {Lease: time.Millisecond}} {
		if _, err := NewLocker(rdb, o); !errors.Is(err, pool.ErrInvalidConfig) {
			t.Errorf("NewLocker with %+v = %v, want pool.ErrInvalidConfig", o, err)
		}
	}
	s, err := New(rdb, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if s.prefix != DefaultPrefix || s.max != pool.DefaultMaxPerTenant || s.retention != pool.DefaultRetention || s.log == nil {
		t.Errorf("defaults: prefix %q, max %d, retention %v", s.prefix, s.max, s.retention)
	}
	l, err := NewLocker(rdb, LockerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if l.prefix != DefaultPrefix || l.lease != DefaultLease || l.retry != DefaultRetryDelay || l.log == nil {
		t.Errorf("locker defaults: prefix %q, lease %v, retry %v", l.prefix, l.lease, l.retry)
	}
}

func TestKeyLayout(t *testing.T) {
	s := &Store{prefix: "valet:"}
	if got, want := s.entryKey("alice", "call_1"), "valet:pool:{5:alice}:e:call_1"; got != want {
		t.Errorf("entryKey = %q, want %q", got, want)
	}
	if got, want := s.indexKey("alice"), "valet:pool:{5:alice}:idx"; got != want {
		t.Errorf("indexKey = %q, want %q", got, want)
	}
	// The tenant's length makes (tenant, id) pairs unambiguous.
	seen := map[string][2]string{}
	for _, p := range [][2]string{{"a", "b}:e:c"}, {"a}:e:b", "c"}, {"a:b", "c"}, {"a", "b:c"}, {"1:a", "b"}, {"a", "idx"}} {
		k := s.entryKey(p[0], p[1])
		if q, ok := seen[k]; ok {
			t.Errorf("%v and %v share the key %q", p, q, k)
		}
		seen[k] = p
		if k == s.indexKey(p[0]) {
			t.Errorf("entry %v has its tenant's index key", p)
		}
	}
}

// logBuffer is a slog.Logger writing text to a buffer, safe for
// concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestCorrupt(t *testing.T) {
	envURL(t)
	ctx := context.Background()
	logs := &logBuffer{}
	s := newStore(t, Config{Logger: slog.New(slog.NewTextHandler(logs, nil))})

	for _, id := range []string{"good1", "good2"} {
		if err := s.Create(ctx, pooltest.NewEntry("t", id)); err != nil {
			t.Fatal(err)
		}
	}
	values := map[string]string{
		"garbage":      "\x00not json{",
		"array":        `[1,2,3]`,
		"empty-object": `{}`,
		"wrong-id":     `{"id":"other","tenant_id":"t","agent_name":"a","status":"waiting_for_input","revision":1,"expires_at":"2999-01-01T00:00:00Z"}`,
		"no-revision":  `{"id":"no-revision","tenant_id":"t","agent_name":"a","status":"waiting_for_input","expires_at":"2999-01-01T00:00:00Z"}`,
	}
	// corrupt stores a real entry, so the index knows it, then spoils it.
	corrupt := func(id string) {
		t.Helper()
		if err := s.Create(ctx, pooltest.NewEntry("t", id)); err != nil {
			t.Fatal(err)
		}
		if err := s.rdb.Set(ctx, s.entryKey("t", id), values[id], redis.KeepTTL).Err(); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(id string) {
		t.Helper()
		if n, err := s.rdb.Exists(ctx, s.entryKey("t", id)).Result(); err != nil || n != 0 {
			t.Errorf("the corrupt value of %q is still there (%d, %v)", id, n, err)
		}
		if _, err := s.rdb.ZScore(ctx, s.indexKey("t"), id).Result(); !errors.Is(err, redis.Nil) {
			t.Errorf("%q is still in the index (%v)", id, err)
		}
	}

	for id := range values {
		corrupt(id)
		e, err := s.Get(ctx, "t", id)
		if !errors.Is(err, pool.ErrCorrupt) || e != nil {
			t.Errorf("Get of corrupt %q = %v, %v; want ErrCorrupt", id, e, err)
		}
		gone(id)
		if _, err := s.Get(ctx, "t", id); !errors.Is(err, pool.ErrNotFound) {
			t.Errorf("second Get of corrupt %q: %v, want ErrNotFound", id, err)
		}

		corrupt(id)
		e, err = s.Take(ctx, "t", id)
		if !errors.Is(err, pool.ErrCorrupt) || e != nil {
			t.Errorf("Take of corrupt %q = %v, %v; want ErrCorrupt", id, e, err)
		}
		gone(id)

		// TakeRevision removes it too, as Take does, whether or not the
		// revision matches what the value holds.
		for _, rev := range []int64{1, 7} {
			corrupt(id)
			e, err = s.TakeRevision(ctx, "t", id, rev)
			if !errors.Is(err, pool.ErrCorrupt) || e != nil {
				t.Errorf("TakeRevision of corrupt %q at revision %d = %v, %v; want ErrCorrupt", id, rev, e, err)
			}
			gone(id)
		}
	}

	// List skips and removes corrupt values, logging each, and returns the rest.
	for id := range values {
		corrupt(id)
	}
	list, err := s.List(ctx, "t")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list) != 2 || list[0].ID != "good1" || list[1].ID != "good2" {
		t.Errorf("List with corrupt values = %d entries; want good1, good2", len(list))
	}
	for id := range values {
		gone(id)
		if !strings.Contains(logs.String(), "id="+id) {
			t.Errorf("no log line names corrupt entry %q:\n%s", id, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "tenant=t") {
		t.Errorf("logs lack a warning with the tenant:\n%s", logs.String())
	}

	// Update of a corrupt value without a revision removes it too.
	corrupt("garbage")
	u := pooltest.NewEntry("t", "garbage")
	u.Revision = 1
	if err := s.Update(ctx, u); !errors.Is(err, pool.ErrCorrupt) {
		t.Errorf("Update of a corrupt value: %v, want ErrCorrupt", err)
	}
	gone("garbage")
}

// TestDanglingIndex: an index member whose entry vanished (evicted by
// Redis, say) is dropped by List and does not count toward the cap once
// List has seen it.
func TestDanglingIndex(t *testing.T) {
	envURL(t)
	ctx := context.Background()
	s := newStore(t, Config{MaxPerTenant: 1})
	if err := s.Create(ctx, pooltest.NewEntry("t", "evicted")); err != nil {
		t.Fatal(err)
	}
	if err := s.rdb.Del(ctx, s.entryKey("t", "evicted")).Err(); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(ctx, "t"); err != nil || len(list) != 0 {
		t.Fatalf("List = %d entries, %v; want none", len(list), err)
	}
	if err := s.Create(ctx, pooltest.NewEntry("t", "next")); err != nil {
		t.Errorf("Create after the dangling member was listed: %v", err)
	}
}

// TestKeysExpire: an entry's key expires at ExpiresAt+Retention and the
// index with the last of them, so an abandoned tenant leaves nothing.
func TestKeysExpire(t *testing.T) {
	envURL(t)
	ctx := context.Background()
	s := newStore(t, Config{Retention: time.Hour})
	e := pooltest.NewEntry("t", "e")
	e.ExpiresAt = time.Now().Add(time.Hour).Round(time.Millisecond)
	if err := s.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	want := e.ExpiresAt.Add(time.Hour)
	for _, k := range []string{s.entryKey("t", "e"), s.indexKey("t")} {
		at, err := s.rdb.PExpireTime(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := time.UnixMilli(at.Milliseconds()); !got.Equal(want) {
			t.Errorf("%s expires at %v, want %v", k, got, want)
		}
	}
	// A later entry extends the index, an earlier one does not shorten it.
	later := pooltest.NewEntry("t", "later")
	later.ExpiresAt = e.ExpiresAt.Add(time.Hour)
	earlier := pooltest.NewEntry("t", "earlier")
	earlier.ExpiresAt = e.ExpiresAt.Add(-time.Minute)
	for _, x := range []*pool.Entry{later, earlier} {
		if err := s.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	at, err := s.rdb.PExpireTime(ctx, s.indexKey("t")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := time.UnixMilli(at.Milliseconds()), later.ExpiresAt.Add(time.Hour); !got.Equal(want) {
		t.Errorf("index expires at %v, want %v", got, want)
	}
}

// TestUnavailable: with no server to talk to, every call fails with an
// error naming the package, never ErrNotFound, and nothing panics.
func TestUnavailable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{
		Addr:          "127.0.0.1:1",
		DialTimeout:   200 * time.Millisecond,
		DialerRetries: 1,
		MaxRetries:    -1,
	})
	defer rdb.Close()
	s, err := New(rdb, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s with Redis down returned no error", op)
		case errors.Is(err, pool.ErrNotFound):
			t.Errorf("%s with Redis down: %v; must not look like not found", op, err)
		case !strings.Contains(err.Error(), "redispool"):
			t.Errorf("%s with Redis down: %q does not name redispool", op, err)
		}
	}
	check("Create", s.Create(ctx, pooltest.NewEntry("t", "e")))
	e := pooltest.NewEntry("t", "e")
	e.Revision = 1
	check("Update", s.Update(ctx, e))
	_, err = s.Get(ctx, "t", "e")
	check("Get", err)
	_, err = s.List(ctx, "t")
	check("List", err)
	_, err = s.Take(ctx, "t", "e")
	check("Take", err)
	_, err = s.TakeRevision(ctx, "t", "e", 1)
	check("TakeRevision", err)
	check("Delete", s.Delete(ctx, "t", "e"))

	l, err := NewLocker(rdb, LockerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	release, err := l.Lock(ctx, "k")
	if release != nil {
		release()
	}
	check("Lock", err)
}

// TestReplicasTake: two Stores on one prefix, each with its own client,
// like two replicas of a service; of goroutines racing to take an entry
// through either, exactly one gets it.
func TestReplicasTake(t *testing.T) {
	envURL(t)
	prefix := uniquePrefix()
	a := newStore(t, Config{Prefix: prefix})
	b := newStore(t, Config{Prefix: prefix})
	ctx := context.Background()
	for round := range 5 {
		id := "hot" + string(rune('0'+round))
		if err := a.Create(ctx, pooltest.NewEntry("t", id)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, "t", id); err != nil {
			t.Fatalf("the other replica does not see the entry: %v", err)
		}
		var wins, misses atomic.Int32
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 32 {
			s := a
			if i%2 == 1 {
				s = b
			}
			wg.Go(func() {
				<-start
				_, err := s.Take(ctx, "t", id)
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, pool.ErrNotFound):
					misses.Add(1)
				default:
					t.Errorf("Take: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || misses.Load() != 31 {
			t.Errorf("round %d: %d takes won, %d not found; want exactly one winner", round, wins.Load(), misses.Load())
		}
	}
}

// TestLease: a holder's lease is renewed, so a waiter keeps waiting past
// it; a holder that stops renewing (a crashed process) loses the lock
// after the lease.
func TestLease(t *testing.T) {
	envURL(t)
	const lease = 300 * time.Millisecond
	prefix := uniquePrefix()
	rdb := client(t, prefix)
	l, err := NewLocker(rdb, LockerConfig{Prefix: prefix, Lease: lease, RetryDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, 3*lease)
	_, err = l.Lock(wait, "k")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock while the holder renews for 3 leases: %v, want DeadlineExceeded", err)
	}
	release()
	wait, cancel = context.WithTimeout(ctx, lease)
	defer cancel()
	r2, err := l.Lock(wait, "k")
	if err != nil {
		t.Fatalf("Lock after release: %v", err)
	}
	r2()

	// A lock left by a holder that died ends with its lease.
	if err := rdb.Set(ctx, prefix+"lock:dead", "someone-else", lease).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	wait, cancel = context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r3, err := l.Lock(wait, "dead")
	if err != nil {
		t.Fatalf("Lock of a dead holder's key: %v", err)
	}
	r3()
	if waited := time.Since(start); waited < lease/2 {
		t.Errorf("took a live lease after %v; want a wait of about %v", waited, lease)
	}
	// Our release did not delete what was not ours: nothing to check
	// beyond the key being free now.
	if n, err := rdb.Exists(ctx, prefix+"lock:dead").Result(); err != nil || n != 0 {
		t.Errorf("lock key still there after release: %d, %v", n, err)
	}
}

// TestReleaseKeepsOthersLock: a release after the lease ended and another
// process took the key does not delete that process's lock.
func TestReleaseKeepsOthersLock(t *testing.T) {
	envURL(t)
	prefix := uniquePrefix()
	rdb := client(t, prefix)
	quiet := slog.New(slog.DiscardHandler) // the renewal will log that the lock was lost
	l, err := NewLocker(rdb, LockerConfig{Prefix: prefix, Lease: 300 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release, err := l.Lock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// Another process overwrites the lock (as if our lease had ended).
	if err := rdb.Set(ctx, prefix+"lock:k", "other", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	release()
	if v, err := rdb.Get(ctx, prefix+"lock:k").Result(); err != nil || v != "other" {
		t.Errorf("after our release the other holder's lock is %q, %v", v, err)
	}
}

// TestIndexPruned: Create drops index members whose retention has ended,
// so a busy tenant's index does not grow without bound.
func TestIndexPruned(t *testing.T) {
	envURL(t)
	ctx := context.Background()
	s := newStore(t, Config{Retention: 50 * time.Millisecond})
	if err := s.Create(ctx, pooltest.NewEntry("t", "long")); err != nil { // keeps the index alive
		t.Fatal(err)
	}
	e := pooltest.NewEntry("t", "old")
	e.ExpiresAt = time.Now().Add(50 * time.Millisecond)
	if err := s.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(e.ExpiresAt.Add(100 * time.Millisecond)))
	if err := s.Create(ctx, pooltest.NewEntry("t", "new")); err != nil {
		t.Fatal(err)
	}
	members, err := s.rdb.ZRange(ctx, s.indexKey("t"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(members, []string{"long", "new"}) {
		t.Errorf("index holds %q, want [long new]", members)
	}
}
