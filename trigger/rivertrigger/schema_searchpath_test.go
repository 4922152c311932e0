package rivertrigger_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// A store whose Config.Schema names one schema while its pool's
// search_path points at another keeps everything in Config.Schema:
// Migrate, the task's run worked by River, a run the reconciler finds
// discarded (HandleLost), Runs and InstanceID; nothing is created in the
// search_path's schema.
func TestSchemaWinsOverSearchPath(t *testing.T) {
	ctx := context.Background()
	admin := pgtest.DB(t)
	home, elsewhere := pgtest.Schema(t, admin), pgtest.Schema(t, admin)
	pool := pgtest.PoolIn(t, elsewhere, 12) // search_path: elsewhere
	s, err := rivertrigger.New(pool, rivertrigger.Config{Schema: home, FetchPollInterval: 100 * time.Millisecond,
		ReconcileInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.InstanceID(ctx); err != nil {
		t.Fatalf("InstanceID: %v", err)
	}
	e, stop := engineOn(t, s, trigger.ExecutorFunc(func(_ context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "ran " + run.Task.ID}, nil
	}))
	if err := e.CreateTask(ctx, oneTime("ann", "now", time.Now().Add(100*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTask(ctx, oneTime("ann", "lost", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the due task completed", statusIs(e, "ann", "now", trigger.StatusCompleted))
	if runs, err := e.Runs(ctx, "ann", "now", 0); err != nil || len(runs) != 1 || runs[0].Result != "ran now" {
		t.Errorf("Runs = %+v, %v; want the one run", runs, err)
	}
	// The other task's job, discarded as River does when a worker died on
	// its last attempt: the reconciler reads it in home and ends the task.
	if _, err := admin.Exec(ctx, `UPDATE `+pgx.Identifier{home, "river_job"}.Sanitize()+` SET state = 'discarded',
		finalized_at = now(), errors = ARRAY['{"error": "worker died", "attempt": 1, "at": "2026-01-01T00:00:00Z"}'::jsonb]
		WHERE kind = $1 AND args->>'task_id' = 'lost'`, rivertrigger.JobKind); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the discarded task DEAD", statusIs(e, "ann", "lost", trigger.StatusDead))
	if err := stop(); err != nil {
		t.Error(err)
	}
	var made []string
	rows, err := admin.Query(ctx, `SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 ORDER BY 1`, elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if made, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(made) != 0 {
		t.Errorf("the search_path's schema %s holds %v; want nothing, everything in Config.Schema %s", elsewhere, made, home)
	}
	var types []string
	rows, err = admin.Query(ctx, `SELECT t.typname::text FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
		WHERE n.nspname = $1 ORDER BY 1`, elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if types, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(types) != 0 {
		t.Errorf("the search_path's schema %s holds types %v", elsewhere, types)
	}
}
