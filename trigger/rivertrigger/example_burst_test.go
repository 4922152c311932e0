package rivertrigger_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// Sizing for the morning burst: the defaults run 100 runs that wait on a
// model at once per replica, each tenant keeping at most 200 ready. Here
// four replicas of 50 each: the window is raised to their 200 workers
// together, so that one tenant alone still uses all of them, and the
// pool has connections for the runs' queries. It needs a PostgreSQL, so
// it is compiled but not run.
func Example_sizing() {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 20
	db, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	store, err := rivertrigger.New(db, rivertrigger.Config{MaxWorkers: 50, TenantWindow: 4 * 50})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	engine, err := trigger.New(trigger.Config{
		Store:         store,
		MaxConcurrent: 50, // as large as MaxWorkers: a run waits for a slot of both
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
				return trigger.ExecResult{Result: "digest for " + run.Task.TenantID}, nil
			})},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := engine.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
