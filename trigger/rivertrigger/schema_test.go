package rivertrigger_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// Two stores on one pool, whose connection string sets no search_path,
// each in a schema of its own (Config.Schema): valet's tables and River's
// are created in their schema, each store sees only its own tasks and
// runs, a run is queued as a River job in its store's schema only and
// worked by its own engine, and each namespace names its schema.
func TestStoresInTwoSchemasKeepApart(t *testing.T) {
	ctx := context.Background()
	db := pgtest.DB(t) // no search_path: both stores on the same connections
	if sp := db.Config().ConnConfig.RuntimeParams["search_path"]; sp != "" {
		t.Fatalf("the test pool sets search_path %q", sp)
	}
	schemaA, schemaB := pgtest.Schema(t, db), pgtest.Schema(t, db)
	open := func(schema string) *rivertrigger.Store {
		s, err := rivertrigger.New(db, rivertrigger.Config{Schema: schema, FetchPollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(schemaA), open(schemaB)

	database := db.Config().ConnConfig.Database
	if a.Namespace() != database+"/"+schemaA || b.Namespace() != database+"/"+schemaB {
		t.Errorf("namespaces %q and %q, want %q and %q", a.Namespace(), b.Namespace(), database+"/"+schemaA, database+"/"+schemaB)
	}
	for _, schema := range []string{schemaA, schemaB} {
		for _, table := range []string{"valet_trigger_tasks", "valet_trigger_runs", "river_job"} {
			var found bool
			if err := db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, table}.Sanitize()).Scan(&found); err != nil {
				t.Fatal(err)
			}
			if !found {
				t.Errorf("Migrate did not create %s.%s", schema, table)
			}
		}
	}

	// The same tenant and task id in both: two tasks.
	var ranA, ranB atomic.Int32
	engA, stopA := engineOn(t, a, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		ranA.Add(1)
		return trigger.ExecResult{Result: "A ran " + run.Task.Action.Instruction}, nil
	}))
	engB, stopB := engineOn(t, b, trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		ranB.Add(1)
		return trigger.ExecResult{Result: "B ran " + run.Task.Action.Instruction}, nil
	}))
	due := oneTime("alice", "remind", time.Now().Add(200*time.Millisecond))
	due.Action.Instruction = "call the dentist"
	if err := engA.CreateTask(ctx, due); err != nil {
		t.Fatal(err)
	}
	later := oneTime("alice", "remind", time.Now().Add(24*time.Hour))
	later.Action.Instruction = "water the plants"
	if err := engB.CreateTask(ctx, later); err != nil {
		t.Fatalf("the same id in the other schema: %v", err)
	}
	waitFor(t, 20*time.Second, "A's task completed", statusIs(engA, "alice", "remind", trigger.StatusCompleted))

	if got, err := engB.Get(ctx, "alice", "remind"); err != nil || got.Action.Instruction != "water the plants" || got.Status != trigger.StatusActive {
		t.Errorf("B's task = %+v, %v; want its own, still active", got, err)
	}
	if tasks, err := b.List(ctx, "alice"); err != nil || len(tasks) != 1 {
		t.Errorf("B lists %d tasks (%v), want its one", len(tasks), err)
	}
	runsA, err := engA.Runs(ctx, "alice", "remind", 0)
	if err != nil || len(runsA) != 1 || runsA[0].Result != "A ran call the dentist" {
		t.Errorf("A's runs = %+v, %v", runsA, err)
	}
	if runsB, err := engB.Runs(ctx, "alice", "remind", 0); err != nil || len(runsB) != 0 {
		t.Errorf("B's runs = %+v, %v; want none", runsB, err)
	}
	// Each task's run is a River job in its own schema: A's worked, B's
	// waiting for tomorrow.
	if st := jobsIn(t, db, schemaA); st["completed"] != 1 || len(st) != 1 {
		t.Errorf("River jobs in A's schema: %v, want one completed", st)
	}
	if st := jobsIn(t, db, schemaB); st["scheduled"] != 1 || len(st) != 1 {
		t.Errorf("River jobs in B's schema: %v, want one scheduled", st)
	}
	if ranA.Load() != 1 || ranB.Load() != 0 {
		t.Errorf("A's executor ran %d times, B's %d; want 1 and 0", ranA.Load(), ranB.Load())
	}
	if err := stopA(); err != nil {
		t.Error(err)
	}
	if err := stopB(); err != nil {
		t.Error(err)
	}
}

// jobsIn counts valet's River jobs in schema by state.
func jobsIn(t *testing.T, db *pgxpool.Pool, schema string) map[string]int {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT state::text, count(*) FROM `+
		pgx.Identifier{schema, "river_job"}.Sanitize()+` WHERE kind = $1 GROUP BY state`, rivertrigger.JobKind)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		out[st] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// A schema PostgreSQL cannot name is refused by New.
func TestSchemaRejected(t *testing.T) {
	db, err := pgxpool.New(context.Background(), "postgres://u@127.0.0.1:1/prod") // never connects
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, schema := range []string{strings.Repeat("s", 64), "a\x00b", "\xff"} {
		if _, err := rivertrigger.New(db, rivertrigger.Config{Schema: schema}); !errors.Is(err, trigger.ErrInvalid) {
			t.Errorf("Schema %q: %v, want ErrInvalid", schema, err)
		}
	}
	s, err := rivertrigger.New(db, rivertrigger.Config{Schema: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Namespace() != "prod/staging" {
		t.Errorf("Namespace() = %q, want prod/staging", s.Namespace())
	}
}
