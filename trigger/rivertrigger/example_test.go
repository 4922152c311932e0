package rivertrigger_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/redisbus"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// Wiring the durable engine at start-up: the store takes the pool the
// host already has and a Config whose zero value means the defaults;
// Schema puts valet's tables and River's in a schema of their own, and the
// bus is named from the store's namespace. It needs a PostgreSQL and a
// Redis, so it is compiled but not run.
func Example() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := rivertrigger.New(db, rivertrigger.Config{Schema: "valet"}) // the schema must exist
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	bus, err := redisbus.New(rdb, redisbus.Config{Namespace: store.Namespace()}) // stream "valet:<database>/valet:events"
	if err != nil {
		log.Fatal(err)
	}

	// In a bot the executor is agentexec.New(orchestrator, agentexec.Config{}).
	var exec trigger.ExecutorFunc = func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "ran " + run.Task.Name}, nil
	}
	engine, err := trigger.New(trigger.Config{
		Store:     store,
		Bus:       bus,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := engine.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
