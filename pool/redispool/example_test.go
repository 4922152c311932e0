package redispool_test

import (
	"context"
	"errors"
	"log"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool/redispool"
)

// Wiring the pool and the conversation locker at start-up: each takes the
// client the host already has and a Config whose zero value means the
// defaults. It needs a Redis, so it is compiled but not run.
func Example() {
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opts) // or redis.NewClusterClient, redis.NewUniversalClient
	defer rdb.Close()

	store, err := redispool.New(rdb, redispool.Config{Prefix: "prod:"})
	if err != nil {
		log.Fatal(err)
	}
	locker, err := redispool.NewLocker(rdb, redispool.LockerConfig{Prefix: "prod:"})
	if err != nil {
		log.Fatal(err)
	}
	_ = agent.Config{Pool: store, Locker: locker}
}

// Steering across replicas: every replica gives its orchestrator a
// Control on the same Redis and prefix, so Orchestrator.Inject, Cancel
// and Pause called on any replica reach the loop wherever it runs. It
// needs a Redis, so it is compiled but not run.
func ExampleNewControl() {
	ctx := context.Background()
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	ctl, err := redispool.NewControl(rdb, redispool.ControlConfig{Prefix: "prod:"})
	if err != nil {
		log.Fatal(err)
	}
	defer ctl.Close()
	o, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), Control: ctl}) // LLM: your model client
	if err != nil {
		log.Fatal(err)
	}
	// From an HTTP handler of any replica, while the user's task runs:
	if err := o.Cancel(ctx, "tenant-1", "conversation-7"); errors.Is(err, agent.ErrNotRunning) {
		log.Print("nothing to cancel")
	}
}
