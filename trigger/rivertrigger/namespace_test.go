package rivertrigger_test

import (
	"context"
	"errors"
	"os"
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

// A Store's namespace is its database and schema, from the pool's
// connection string, unless Config.Namespace says otherwise; a redisbus
// Bus of another namespace (the default one included) is refused by
// trigger.New, and one given the store's names its stream from it. No
// PostgreSQL or Redis needed: neither New connects.
func TestNamespaceIsDatabaseAndSchema(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for url, want := range map[string]string{
		"postgres://u@127.0.0.1:1/prod":                                 "prod/public",
		"postgres://u@127.0.0.1:1/prod?search_path=staging":             "prod/staging",
		`postgres://u@127.0.0.1:1/prod?search_path=%22Tenant%22,public`: "prod/Tenant",
	} {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		s, err := rivertrigger.New(pool, rivertrigger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Namespace() != want {
			t.Errorf("%s: Namespace() = %q, want %q", url, s.Namespace(), want)
		}
		if s, _ := rivertrigger.New(pool, rivertrigger.Config{Namespace: "blue"}); s.Namespace() != "blue" {
			t.Errorf("Config.Namespace blue: Namespace() = %q", s.Namespace())
		}
		exec := map[string]trigger.Executor{trigger.DefaultExecutor: nopExec{}}
		plain, err := redisbus.New(rdb, redisbus.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trigger.New(trigger.Config{Store: s, Bus: plain, Executors: exec}); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("%s: a bus on the default stream: %v, want ErrInvalid", url, err)
		}
		bus, err := redisbus.New(rdb, redisbus.Config{Namespace: s.Namespace()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trigger.New(trigger.Config{Store: s, Bus: bus, Executors: exec}); err != nil {
			t.Errorf("%s: a bus of the store's namespace: %v", url, err)
		}
		if got := bus.Stream(); got != "valet:"+want+":events" {
			t.Errorf("%s: the bus's stream is %q", url, got)
		}
	}
}

// Two environments (two schemas) share one Redis, each bus named from its
// store: an event published in one fires its own task only, never the
// other environment's task on the same source.
func TestTwoEnvironmentsShareRedis(t *testing.T) {
	redisURL := os.Getenv("VALET_TEST_REDIS")
	if redisURL == "" {
		t.Skip("VALET_TEST_REDIS not set")
	}
	postgresURL(t)
	ro, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ro)
	t.Cleanup(func() { _ = rdb.Close() }) // after the engines stop and their keys are deleted
	ctx := context.Background()
	type env struct {
		e     *trigger.Engine
		calls atomic.Int32
	}
	envs := make([]*env, 2)
	for i := range envs {
		v := &env{}
		envs[i] = v
		s, _ := newStore(t, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
		bus, err := redisbus.New(rdb, redisbus.Config{Namespace: s.Namespace(), Block: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rdb.Del(context.Background(), bus.Stream(), bus.DeadStream(), bus.OwnerKey()) })
		e, err := trigger.New(trigger.Config{Store: s, Bus: bus, MaxConcurrent: 4,
			Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
				func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
					v.calls.Add(1)
					return trigger.ExecResult{Result: "seen"}, nil
				})}})
		if err != nil {
			t.Fatal(err)
		}
		v.e = e
		task := &trigger.Task{ID: "mail", TenantID: "alice", Name: "mail",
			Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "gmail"},
			Action:  trigger.Action{Instruction: "summarise it"}}
		if err := e.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { _ = e.Run(rctx) })
		t.Cleanup(func() { cancel(); wg.Wait() })
	}
	for _, id := range []string{"m1", "m2", "m3", "m4"} {
		if err := envs[0].e.Publish(ctx, trigger.Event{ID: id, TenantID: "alice", Source: "gmail"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "the four runs of the first environment", func() (bool, error) {
		runs, err := envs[0].e.Runs(ctx, "alice", "mail", 0)
		n := 0
		for _, r := range runs {
			if r.Status == trigger.RunSucceeded {
				n++
			}
		}
		return n == 4, err
	})
	time.Sleep(500 * time.Millisecond) // a cross-wired delivery would have run by now
	if runs, err := envs[1].e.Runs(ctx, "alice", "mail", 0); err != nil || len(runs) != 0 || envs[1].calls.Load() != 0 {
		t.Fatalf("the other environment ran %d times: %+v, %v", envs[1].calls.Load(), runs, err)
	}
}
