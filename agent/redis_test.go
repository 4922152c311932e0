package agent_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool/redispool"
)

// redisClient connects to VALET_TEST_REDIS or skips; every key under
// prefix is deleted and the client closed when the test ends.
func redisClient(t *testing.T, prefix string) *redis.Client {
	t.Helper()
	url := os.Getenv("VALET_TEST_REDIS")
	if url == "" {
		t.Skip("VALET_TEST_REDIS not set; set it to a Redis URL such as redis://127.0.0.1:6379/0 to run the Redis tests")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("VALET_TEST_REDIS=%q: %v", url, err)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() {
		defer rdb.Close()
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err != nil {
			t.Errorf("cleaning up %s*: %v", prefix, err)
		}
	})
	return rdb
}

// replica is one orchestrator process: its own Redis client, pool store
// and locker on the shared prefix.
func replica(t *testing.T, prefix string, email *emailAgent, starts bool, locked bool) *agent.Orchestrator {
	t.Helper()
	rdb := redisClient(t, prefix)
	store, err := redispool.New(rdb, redispool.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{Pool: store}
	if locked {
		l, err := redispool.NewLocker(rdb, redispool.LockerConfig{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Locker = l
	}
	var mu sync.Mutex
	first := starts
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		mu.Lock()
		defer mu.Unlock()
		if first && len(req.Tools) > 0 {
			first = false
			return llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))
		}
		return llmtest.Text("ok")
	})
	return agentsOrch(t, model, cfg, email, &noteAgent{})
}

// TestApprovalRunsOnceAcrossReplicas races approvals of one request on two
// orchestrators that share a Redis pool — with and without the
// conversation Locker: the atomic take alone guarantees one run.
func TestApprovalRunsOnceAcrossReplicas(t *testing.T) {
	for _, locked := range []bool{false, true} {
		name := "take-only"
		if locked {
			name = "with-locker"
		}
		t.Run(name, func(t *testing.T) {
			for round := range 3 {
				prefix := "valettest:" + rand.Text()[:10] + ":"
				email := &emailAgent{}
				a := replica(t, prefix, email, true, locked)
				b := replica(t, prefix, email, false, locked)
				ctx := context.Background()
				first, err := a.HandleMessage(ctx, msg("mail the team"))
				if err != nil {
					t.Fatal(err)
				}
				id := first.PendingApprovals[0].ID
				// The other replica sees the approval.
				if list, err := b.ListPendingApprovals(ctx, "u1"); err != nil || len(list) != 1 || list[0].ID != id {
					t.Fatalf("replica b sees %v, %v", list, err)
				}
				var wg sync.WaitGroup
				var wins atomic.Int32
				start := make(chan struct{})
				for i := range 10 {
					o := []*agent.Orchestrator{a, b}[i%2]
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						if i%5 == 4 {
							if _, err := o.HandleMessage(ctx, msg("yes")); err != nil {
								t.Errorf("reply: %v", err)
							}
							return
						}
						_, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve})
						switch {
						case err == nil:
							wins.Add(1)
						case !errors.Is(err, approval.ErrNotFound):
							t.Errorf("loser's error: %v", err)
						}
					}()
				}
				close(start)
				wg.Wait()
				if n := len(email.Sent()); n != 1 {
					t.Fatalf("round %d: sent %d times", round, n)
				}
				if wins.Load() > 1 {
					t.Fatalf("round %d: %d winners", round, wins.Load())
				}
			}
		})
	}
}

func TestRedisUnavailable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	store, err := redispool.New(rdb, redispool.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)), llmtest.Text("I could not queue the email."))
	email := &emailAgent{}
	o := agentsOrch(t, s, agent.Config{Pool: store}, email, &noteAgent{})
	// Serving the conversation's waiting agents needs the pool: a clear
	// error, before any model call.
	res, err := o.HandleMessage(context.Background(), msg("mail the team"))
	if err == nil || !strings.Contains(err.Error(), "agent: reading the pool") || res.Status != agent.StatusError || s.Calls() != 0 {
		t.Fatalf("err = %v, res = %+v, model calls = %d", err, res, s.Calls())
	}
	if _, err := o.ListPendingApprovals(context.Background(), "u1"); err == nil {
		t.Fatal("ListPendingApprovals with Redis down must fail")
	}
	if _, err := o.ResolveApproval(context.Background(), "u1", "agt_x", approval.Decision{Action: approval.Approve}); err == nil || errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("ResolveApproval with Redis down: %v (must not look like not-found)", err)
	}
	if len(email.Sent()) != 0 {
		t.Fatal("something ran")
	}
}

func TestCorruptPoolValueIsSkipped(t *testing.T) {
	prefix := "valettest:" + rand.Text()[:10] + ":"
	email := &emailAgent{}
	a := replica(t, prefix, email, true, false)
	ctx := context.Background()
	first, err := a.HandleMessage(ctx, msg("mail the team"))
	if err != nil {
		t.Fatal(err)
	}
	// Garble the stored entry.
	rdb := redisClient(t, prefix)
	keys, err := rdb.Keys(ctx, prefix+"*"+first.PendingApprovals[0].ID+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys = %v, %v", keys, err)
	}
	if err := rdb.Set(ctx, keys[0], "{not json", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	res, err := a.HandleMessage(ctx, msg("yes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(email.Sent()) != 0 || res.Status != agent.StatusCompleted {
		t.Fatalf("res = %+v", res)
	}
	if n, _ := rdb.Exists(ctx, keys[0]).Result(); n != 0 {
		t.Fatal("the corrupt value was not removed")
	}
}
