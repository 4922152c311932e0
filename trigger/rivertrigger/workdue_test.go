package rivertrigger_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// workDueSetup returns a migrated store in a schema of its own, named by
// Config.Schema on a pool without a search_path, and an engine on it,
// both on clk. The engine is not started.
func workDueSetup(t *testing.T, clk *clocktest.Clock, exec trigger.ExecutorFunc) (*rivertrigger.Store, *trigger.Engine, *pgxpool.Pool, string) {
	t.Helper()
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	store, err := rivertrigger.New(db, rivertrigger.Config{Schema: schema, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	engine, err := trigger.New(trigger.Config{
		Store:     store,
		Clock:     clk,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
	})
	if err != nil {
		t.Fatal(err)
	}
	return store, engine, db, schema
}

type jobRow struct {
	state       string
	scheduledAt time.Time
	attempt     int
}

// valetJobs returns the valet jobs in schema, oldest first.
func valetJobs(t *testing.T, db *pgxpool.Pool, schema string) []jobRow {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT state::text, scheduled_at, attempt FROM `+
		pgx.Identifier{schema, "river_job"}.Sanitize()+` WHERE kind = $1 ORDER BY id`, rivertrigger.JobKind)
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (jobRow, error) {
		var j jobRow
		err := r.Scan(&j.state, &j.scheduledAt, &j.attempt)
		return j, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func dailyTask(id string) *trigger.Task {
	return &trigger.Task{
		ID: id, TenantID: "acme", Name: "digest",
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 8 * * *"}},
		Action:  trigger.Action{Instruction: "send the digest"},
	}
}

// A daily 08:00 task on the durable path, tested on a fake clock: its
// River job is worked by WorkDue when the clock says it is due, the run
// is recorded with the executor's result, and the next day's job is
// queued for tomorrow 08:00 and worked then — without Engine.Run and
// without waiting.
func TestWorkDueRunsADailyTaskOnTheFakeClock(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(day.Add(7 * time.Hour))
	ran := 0
	store, engine, db, schema := workDueSetup(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		ran++
		return trigger.ExecResult{Result: fmt.Sprintf("digest %d due %s", ran, run.DueAt.Format(time.DateTime))}, nil
	})
	if err := engine.CreateTask(ctx, dailyTask("digest")); err != nil {
		t.Fatal(err)
	}

	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 0 {
		t.Fatalf("WorkDue at 07:00 = %d, %v; want 0 (nothing due)", n, err)
	}
	clk.Set(day.Add(8 * time.Hour))
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 1 {
		t.Fatalf("WorkDue at 08:00 = %d, %v; want 1", n, err)
	}
	runs, err := engine.Runs(ctx, "acme", "digest", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "digest 1 due 2031-05-06 08:00:00" {
		t.Fatalf("runs after 08:00: %+v", runs)
	}
	task, err := engine.Get(ctx, "acme", "digest")
	if err != nil {
		t.Fatal(err)
	}
	tomorrow := day.Add(32 * time.Hour)
	if !task.NextRun.Equal(tomorrow) || task.Status != trigger.StatusActive {
		t.Fatalf("task after the run: %s, next %s; want ACTIVE, next %s", task.Status, task.NextRun, tomorrow)
	}
	jobs := valetJobs(t, db, schema)
	var queued []jobRow
	for _, j := range jobs {
		switch j.state {
		case "completed":
		case "scheduled", "available":
			queued = append(queued, j)
		default:
			t.Errorf("a job %s", j.state)
		}
	}
	if len(jobs) != 2 || len(queued) != 1 || !queued[0].scheduledAt.Equal(tomorrow) {
		t.Fatalf("jobs after the run: %+v; want today's completed and one queued at %s", jobs, tomorrow)
	}

	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 0 {
		t.Fatalf("WorkDue at 08:00 again = %d, %v; want 0", n, err)
	}
	clk.Set(tomorrow)
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 1 {
		t.Fatalf("WorkDue tomorrow at 08:00 = %d, %v; want 1", n, err)
	}
	runs, err = engine.Runs(ctx, "acme", "digest", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Status != trigger.RunSucceeded || runs[0].Result != "digest 2 due 2031-05-07 08:00:00" {
		t.Fatalf("runs after tomorrow 08:00: %+v", runs)
	}
}

// A failing executor on the durable path: WorkDue leaves the job
// retryable at the task's backoff, works it again when the clock reaches
// that time, and after the last attempt the job is discarded and the task
// DEAD.
func TestWorkDueRetriesAFailingRunUntilDead(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2031, 5, 6, 0, 0, 0, 0, time.UTC)
	clk := clocktest.New(day.Add(7 * time.Hour))
	store, engine, db, schema := workDueSetup(t, clk, func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{}, fmt.Errorf("mail server down (attempt %d)", run.Attempt)
	})
	task := dailyTask("digest")
	task.Retry = trigger.Retry{MaxAttempts: 2, Backoff: time.Minute}
	if err := engine.CreateTask(ctx, task); err != nil {
		t.Fatal(err)
	}

	at8 := day.Add(8 * time.Hour)
	clk.Set(at8)
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 1 {
		t.Fatalf("WorkDue at 08:00 = %d, %v; want 1", n, err)
	}
	jobs := valetJobs(t, db, schema)
	if len(jobs) != 1 || jobs[0].state != "retryable" || jobs[0].attempt != 1 || !jobs[0].scheduledAt.Equal(at8.Add(time.Minute)) {
		t.Fatalf("jobs after the first attempt: %+v; want one retryable at 08:01 after attempt 1", jobs)
	}
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 0 {
		t.Fatalf("WorkDue at 08:00 again = %d, %v; want 0 (the retry is at 08:01)", n, err)
	}

	clk.Set(at8.Add(time.Minute))
	if n, err := store.WorkDue(ctx, engine, clk.Now()); err != nil || n != 1 {
		t.Fatalf("WorkDue at 08:01 = %d, %v; want 1", n, err)
	}
	jobs = valetJobs(t, db, schema)
	if len(jobs) != 1 || jobs[0].state != "discarded" || jobs[0].attempt != 2 {
		t.Fatalf("jobs after the last attempt: %+v; want one discarded after attempt 2", jobs)
	}
	got, err := engine.Get(ctx, "acme", "digest")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != trigger.StatusDead {
		t.Fatalf("task after the last attempt: %s, want DEAD", got.Status)
	}
	runs, err := engine.Runs(ctx, "acme", "digest", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != trigger.RunDead || runs[0].Attempt != 2 {
		t.Fatalf("runs: %+v; want one dead run after attempt 2", runs)
	}
	if n, err := store.WorkDue(ctx, engine, clk.Now().Add(24*time.Hour)); err != nil || n != 0 {
		t.Fatalf("WorkDue a day later = %d, %v; want 0 (the task is DEAD)", n, err)
	}
}

func TestWorkDueNeedsAHandler(t *testing.T) {
	store, _ := newStore(t, rivertrigger.Config{})
	if _, err := store.WorkDue(context.Background(), nil, time.Now()); !errors.Is(err, trigger.ErrInvalid) {
		t.Fatalf("WorkDue with a nil handler: %v, want ErrInvalid", err)
	}
}

// A user's test of a daily 08:00 task on the River path: one fake clock
// for the store and the engine, the engine not started, and WorkDue to
// run what is due when the clock is moved. It needs a PostgreSQL and an
// existing schema of its own, so it is compiled but not run here;
// TestWorkDueRunsADailyTaskOnTheFakeClock runs the same steps.
func ExampleStore_WorkDue() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	clk := clocktest.New(time.Date(2031, 5, 6, 7, 0, 0, 0, time.UTC))
	store, err := rivertrigger.New(db, rivertrigger.Config{Schema: "valet_test", Clock: clk})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	var exec trigger.ExecutorFunc = func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "digest sent"}, nil
	}
	engine, err := trigger.New(trigger.Config{
		Store: store, Clock: clk,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
	})
	if err != nil {
		log.Fatal(err)
	}
	err = engine.CreateTask(ctx, &trigger.Task{
		ID: "digest", TenantID: "acme", Name: "digest",
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 8 * * *"}},
		Action:  trigger.Action{Instruction: "send the digest"},
	})
	if err != nil {
		log.Fatal(err)
	}

	clk.Set(time.Date(2031, 5, 6, 8, 0, 0, 0, time.UTC))
	n, err := store.WorkDue(ctx, engine, clk.Now()) // no Engine.Run, no waiting
	if err != nil {
		log.Fatal(err)
	}
	task, err := engine.Get(ctx, "acme", "digest")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "run; next", task.NextRun.Format(time.DateTime))
}
