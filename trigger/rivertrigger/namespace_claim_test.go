package rivertrigger_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// testRedis connects to VALET_TEST_REDIS (or skips t) and returns a
// stream of the test's own; the stream, its dead stream and its owner
// are deleted when t ends.
func testRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	u := os.Getenv("VALET_TEST_REDIS")
	if u == "" {
		t.Skip("VALET_TEST_REDIS not set")
	}
	ro, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ro)
	stream := "valettest:" + rand.Text()[:12] + ":events"
	t.Cleanup(func() {
		defer rdb.Close()
		rdb.Del(context.Background(), stream, stream+redisbus.DeadSuffix, stream+redisbus.OwnerSuffix)
	})
	return rdb, stream
}

// storeOn returns a Store on a pool of url working in schema.
func storeOn(t *testing.T, url, schema string, cfg rivertrigger.Config) *rivertrigger.Store {
	t.Helper()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	pc.ConnConfig.RuntimeParams["search_path"] = schema
	pc.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := rivertrigger.New(pool, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// claimEnv is one deployment: a Store, a Bus on the shared stream, and an
// engine counting the runs of its event task "mail".
type claimEnv struct {
	e     *trigger.Engine
	calls atomic.Int32
}

func newClaimEnv(t *testing.T, s *rivertrigger.Store, rdb *redis.Client, stream string) *claimEnv {
	t.Helper()
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	bus, err := redisbus.New(rdb, redisbus.Config{Namespace: s.Namespace(), Stream: stream, Block: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	v := &claimEnv{}
	v.e, err = trigger.New(trigger.Config{Store: s, Bus: bus, MaxConcurrent: 4,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
				v.calls.Add(1)
				return trigger.ExecResult{Result: "seen"}, nil
			})}})
	if err != nil {
		t.Fatal(err)
	}
	task := &trigger.Task{ID: "mail", TenantID: "alice", Name: "mail",
		Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail"},
		Action:  trigger.Action{Instruction: "summarise it"}}
	if err := v.e.CreateTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	return v
}

// run starts the engine; the returned function stops it and returns Run's
// result.
func (v *claimEnv) run(t *testing.T) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- v.e.Run(ctx) }()
	var once sync.Once
	var result error
	stop := func() error {
		once.Do(func() { cancel(); result = <-done })
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func (v *claimEnv) succeeded(n int) func() (bool, error) {
	return func() (bool, error) {
		runs, err := v.e.Runs(context.Background(), "alice", "mail", 0)
		k := 0
		for _, r := range runs {
			if r.Status == trigger.RunSucceeded {
				k++
			}
		}
		return k == n, err
	}
}

// Two environments on two PostgreSQL servers whose databases have the
// same name (one config template, the usual case) and that share one
// Redis get the same default namespace, "valet/public", so both buses
// read and write one stream: staging's engines would take production's
// events (issue 18 item 13). The server's name cannot tell them apart
// (one deployment reaches its server by several names), but their data
// can: the first engine to run claims the stream for its database, and
// the other's Run is refused, ErrInvalid, before it takes any event.
// Here two schemas of the test database, given the same namespace,
// stand for the two servers.
func TestNamespaceClaimTellsDatabasesApart(t *testing.T) {
	pgURL := postgresURL(t)
	rdb, stream := testRedis(t)
	const ns = "valet/public" // both servers' default
	prod := newClaimEnv(t, storeOn(t, pgURL, newSchema(t), rivertrigger.Config{Namespace: ns, FetchPollInterval: 100 * time.Millisecond}), rdb, stream)
	staging := newClaimEnv(t, storeOn(t, pgURL, newSchema(t), rivertrigger.Config{Namespace: ns, FetchPollInterval: 100 * time.Millisecond}), rdb, stream)
	stopProd := prod.run(t)
	ctx := context.Background()
	if err := prod.e.Publish(ctx, trigger.Event{ID: "m1", TenantID: "alice", Source: "gmail"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "production's run of m1", prod.succeeded(1))

	rctx, cancel := context.WithTimeout(ctx, 20*time.Second) // it would run until then
	defer cancel()
	err := staging.e.Run(rctx)
	if !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("staging's Run on production's stream: %v, want ErrInvalid", err)
	}
	for _, want := range []string{"another database", "rivertrigger.Config.Namespace", "redisbus.Config.Namespace"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	for _, id := range []string{"m2", "m3"} {
		if err := prod.e.Publish(ctx, trigger.Event{ID: id, TenantID: "alice", Source: "gmail"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "production's runs of m2 and m3", prod.succeeded(3))
	if runs, err := staging.e.Runs(ctx, "alice", "mail", 0); err != nil || len(runs) != 0 || staging.calls.Load() != 0 {
		t.Fatalf("staging ran %d times: %+v, %v", staging.calls.Load(), runs, err)
	}
	if err := stopProd(); err != nil {
		t.Fatalf("production's Run: %v", err)
	}
}

// otherName returns url with its host given by another name of the same
// server (127.0.0.1 for localhost and back), as pgbouncer and a direct
// address, or DNS and an IP, reach one database.
func otherName(t *testing.T, pgURL string) string {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatal(err)
	}
	var other string
	switch u.Hostname() {
	case "127.0.0.1":
		other = "localhost"
	case "localhost":
		other = "127.0.0.1"
	default:
		t.Skipf("needs the test database on 127.0.0.1 or localhost, not %s", u.Hostname())
	}
	if p := u.Port(); p != "" {
		other = net.JoinHostPort(other, p)
	}
	u.Host = other
	return u.String()
}

// One deployment reaching its database by two names (here localhost and
// 127.0.0.1) shares one stream: its engines on either pool claim it for
// the same data, and both run.
func TestNamespaceClaimOneDatabaseByTwoNames(t *testing.T) {
	pgURL := postgresURL(t)
	rdb, stream := testRedis(t)
	schema := newSchema(t)
	a := storeOn(t, pgURL, schema, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	b := storeOn(t, otherName(t, pgURL), schema, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	ctx := context.Background()
	for _, s := range []*rivertrigger.Store{a, b} {
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ida, erra := a.InstanceID(ctx)
	idb, errb := b.InstanceID(ctx)
	if erra != nil || errb != nil || ida == "" || ida != idb {
		t.Fatalf("one database by two names: ids %q (%v) and %q (%v), want one", ida, erra, idb, errb)
	}
	va := newClaimEnv(t, a, rdb, stream)
	bus, err := redisbus.New(rdb, redisbus.Config{Namespace: b.Namespace(), Stream: stream, Block: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var bcalls atomic.Int32
	eb, err := trigger.New(trigger.Config{Store: b, Bus: bus, MaxConcurrent: 4,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
				bcalls.Add(1)
				return trigger.ExecResult{Result: "seen"}, nil
			})}})
	if err != nil {
		t.Fatal(err)
	}
	// By localhost alone first, then by 127.0.0.1 alone: each takes
	// events, so each claimed the stream.
	vb := &claimEnv{e: eb}
	stopB := vb.run(t)
	publish := func(ids ...string) {
		for _, id := range ids {
			if err := va.e.Publish(ctx, trigger.Event{ID: id, TenantID: "alice", Source: "gmail"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish("m1")
	waitFor(t, 20*time.Second, "the run of m1 by localhost", va.succeeded(1))
	stopA := va.run(t)
	if err := stopB(); err != nil {
		t.Fatalf("Run by localhost: %v", err)
	}
	publish("m2", "m3")
	waitFor(t, 20*time.Second, "the runs of m2 and m3 by 127.0.0.1", va.succeeded(3))
	if err := stopA(); err != nil {
		t.Fatalf("Run by 127.0.0.1: %v", err)
	}
	if a, b := va.calls.Load(), bcalls.Load(); a != 2 || b != 1 {
		t.Fatalf("executions: %d by 127.0.0.1, %d by localhost; want 2 and 1", a, b)
	}
}

// Processes migrating one schema at once make one instance id, which
// every Store on the schema reports, also a Store made later (a restart).
// Another schema's data has another id, and a Store whose schema was not
// migrated reports none.
func TestInstanceIDIsTheSchemasOwn(t *testing.T) {
	pgURL := postgresURL(t)
	schema := newSchema(t)
	ctx := context.Background()
	stores := make([]*rivertrigger.Store, 4)
	for i := range stores {
		stores[i] = storeOn(t, pgURL, schema, rivertrigger.Config{})
	}
	if _, err := stores[0].InstanceID(ctx); err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("InstanceID before Migrate: %v, want an error saying to run Migrate", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	first, err := stores[0].InstanceID(ctx)
	if err != nil || first == "" {
		t.Fatalf("InstanceID: %q, %v", first, err)
	}
	for i, s := range stores {
		if id, err := s.InstanceID(ctx); err != nil || id != first {
			t.Errorf("store %d: InstanceID %q, %v; want %q", i, id, err, first)
		}
	}
	restarted := storeOn(t, pgURL, schema, rivertrigger.Config{})
	if err := restarted.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if id, err := restarted.InstanceID(ctx); err != nil || id != first {
		t.Errorf("after a restart: InstanceID %q, %v; want %q", id, err, first)
	}
	other := storeOn(t, pgURL, newSchema(t), rivertrigger.Config{Namespace: restarted.Namespace()})
	if err := other.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if id, err := other.InstanceID(ctx); err != nil || id == "" || id == first {
		t.Errorf("another schema: InstanceID %q, %v; want one of its own", id, err)
	}
}
