package redispool_test

import (
	"log"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/agent"
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
