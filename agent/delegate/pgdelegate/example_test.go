package pgdelegate_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/pgdelegate"
)

// Example wires the engine on a pool: Migrate at start from every
// process, Run for as long as the process lives, Submit from anywhere.
// exec is the host's delegate.Executor (agent.Orchestrator.TaskExecutor).
func Example() {
	ctx := context.Background()
	url := os.Getenv("VALET_TEST_POSTGRES")
	if url == "" {
		return // needs a PostgreSQL
	}
	db, err := pgxpool.New(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	eng, err := pgdelegate.New(db, pgdelegate.Config{Schema: "public"})
	if err != nil {
		log.Fatal(err)
	}
	if err := eng.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	var exec delegate.Executor // o.TaskExecutor() of an agent.Orchestrator o
	if exec != nil {
		go func() { _ = eng.Run(ctx, exec) }()
	}
	g, err := delegate.NewGraph("tenant-1", "conversation-1", []delegate.TaskSpec{
		{ID: "research", Skill: "research", Task: "Compare three hotels in Lisbon"},
		{ID: "write", Skill: "writer", Task: "Draft the booking email",
			Context: "Use [agent_result:research]", DependsOn: []string{"research"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	_ = g // eng.Submit(ctx, g) queues "research" as a River job; "write" follows in its completing transaction
}
