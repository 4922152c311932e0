package rivertrigger_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// childSchema names the schema a child engine of TestTwoEnginesOneKilled
// works in; the test binary started with it set runs TestKillChild only.
const childSchema = "RIVERTRIGGER_TEST_CHILD_SCHEMA"

// killConfig is the store configuration of both engines: a short rescue
// delay, so that the killed engine's runs come back within the test.
func killConfig() rivertrigger.Config {
	return rivertrigger.Config{
		MaxWorkers:           4,
		JobTimeout:           4 * time.Second,
		RescueStuckJobsAfter: 5 * time.Second,
		FetchPollInterval:    100 * time.Millisecond,
	}
}

// recordingExec records each execution in rt_exec (start, then finished),
// taking d.
func recordingExec(pool *pgxpool.Pool, d time.Duration) trigger.Executor {
	pid := os.Getpid()
	return trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		if _, err := pool.Exec(ctx, `INSERT INTO rt_exec (run_id, pid, attempt) VALUES ($1, $2, $3)`,
			run.RunID, pid, run.Attempt); err != nil {
			return trigger.ExecResult{}, err
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return trigger.ExecResult{}, ctx.Err()
		}
		_, err := pool.Exec(ctx, `UPDATE rt_exec SET finished = true WHERE run_id = $1 AND pid = $2 AND attempt = $3`,
			run.RunID, pid, run.Attempt)
		return trigger.ExecResult{Result: "ok"}, err
	})
}

// TestKillChild is the engine TestTwoEnginesOneKilled starts in a child
// process and kills; it does nothing otherwise.
func TestKillChild(t *testing.T) {
	schema := os.Getenv(childSchema)
	if schema == "" {
		t.Skip("the child engine of TestTwoEnginesOneKilled")
	}
	pool := poolIn(t, schema)
	s, err := rivertrigger.New(pool, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	e, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 4, RunTimeout: 3 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: recordingExec(pool, 150*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_ = e.Run(ctx) // until killed
}

// TestTwoEnginesOneKilled runs 1,000 due runs on two engines sharing one
// database, one of them in a child process killed (SIGKILL) while it has
// runs under way. Every run must be recorded complete exactly once, none
// lost, and no run executed twice except those the killed engine had under
// way, which River rescues and the other engine runs again as attempt 2.
func TestTwoEnginesOneKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("takes about a minute")
	}
	const n = 1000
	schema := newSchema(t)
	pool := poolIn(t, schema)
	s, err := rivertrigger.New(pool, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE rt_exec (run_id text NOT NULL, pid int NOT NULL,
		attempt int NOT NULL, finished bool NOT NULL DEFAULT false)`); err != nil {
		t.Fatal(err)
	}
	e, err := trigger.New(trigger.Config{Store: s, MaxConcurrent: 4, RunTimeout: 3 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: recordingExec(pool, 20*time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	first := time.Now().Add(6 * time.Second)
	for i := range n {
		at := first.Add(time.Duration(i) * 4 * time.Millisecond)
		if soon := time.Now().Add(time.Second); at.Before(soon) {
			at = soon // creating them took longer than planned (a loaded machine): no time in the past
		}
		task := oneTime(fmt.Sprintf("tenant%d", i%7), fmt.Sprintf("k%04d", i), at)
		if err := e.CreateTask(ctx, task); err != nil {
			t.Fatal(err)
		}
	}

	child := exec.Command(os.Args[0], "-test.run", "^TestKillChild$", "-test.count", "1")
	child.Env = append(os.Environ(), childSchema+"="+schema)
	child.Stdout, child.Stderr = os.Stderr, os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() { stop(); <-done }()

	// Kill the child once it has done some runs and has one under way.
	cpid := child.Process.Pid
	waitFor(t, 60*time.Second, "the child engine at work", func() (bool, error) {
		var done, open int
		err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE finished), count(*) FILTER (WHERE NOT finished)
			FROM rt_exec WHERE pid = $1`, cpid).Scan(&done, &open)
		return done >= 50 && open > 0, err
	})
	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	killed = true
	var inFlight []string
	rows, err := pool.Query(ctx, `SELECT run_id FROM rt_exec WHERE pid = $1 AND NOT finished`, cpid)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		_ = rows.Scan(&id)
		inFlight = append(inFlight, id)
	}
	rows.Close()
	t.Logf("killed the child engine with %d runs under way", len(inFlight))

	defer func() {
		if t.Failed() {
			rows, _ := pool.Query(ctx, `SELECT state::text, attempt, count(*), min(scheduled_at), max(scheduled_at) FROM river_job GROUP BY 1, 2`)
			for rows.Next() {
				var st string
				var a, c int
				var mn, mx time.Time
				_ = rows.Scan(&st, &a, &c, &mn, &mx)
				t.Logf("jobs %s attempt %d: %d (%s..%s)", st, a, c, mn, mx)
			}
			rows.Close()
			var ts, rs int
			_ = pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'COMPLETED'), (SELECT count(*) FROM valet_trigger_runs) FROM valet_trigger_tasks`).Scan(&ts, &rs)
			t.Logf("completed tasks %d, runs %d, now %s", ts, rs, time.Now().UTC())
		}
	}()
	waitFor(t, 90*time.Second, "every task COMPLETED", func() (bool, error) {
		var c int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM valet_trigger_tasks WHERE status = 'COMPLETED'`).Scan(&c)
		return c == n, err
	})

	check := func(what, query string, want int) {
		t.Helper()
		var got int
		if err := pool.QueryRow(ctx, query).Scan(&got); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}
	check("runs recorded", `SELECT count(*) FROM valet_trigger_runs`, n)
	check("runs recorded succeeded", `SELECT count(*) FROM valet_trigger_runs WHERE run->>'status' = 'succeeded'`, n)
	check("tasks with other than one run", `SELECT count(*) FROM valet_trigger_tasks t
		WHERE (SELECT count(*) FROM valet_trigger_runs r WHERE r.tenant_id = t.tenant_id AND r.task_id = t.id) <> 1`, 0)
	check("jobs", `SELECT count(*) FROM river_job WHERE kind = 'valet_trigger_run'`, n)
	check("jobs completed", `SELECT count(*) FROM river_job WHERE kind = 'valet_trigger_run' AND state = 'completed'`, n)
	check("run ids executed", `SELECT count(DISTINCT run_id) FROM rt_exec`, n)
	check("run ids executed more than twice", `SELECT count(*) FROM
		(SELECT run_id FROM rt_exec GROUP BY run_id HAVING count(*) > 2) x`, 0)
	// A run executed twice was under way in the killed engine (as attempt
	// 1; it may have finished executing but not been recorded) and ran
	// again in the other as attempt 2, River's rescue. The killed engine
	// had at most its 4 workers' runs under way.
	twice := map[string]bool{}
	rows, err = pool.Query(ctx, `SELECT run_id,
			bool_and((pid = $1 AND attempt = 1) OR (pid <> $1 AND attempt = 2)),
			count(*) FILTER (WHERE pid = $1)
		FROM rt_exec GROUP BY run_id HAVING count(*) = 2`, cpid)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var rescue bool
		var byChild int
		if err := rows.Scan(&id, &rescue, &byChild); err != nil {
			t.Fatal(err)
		}
		twice[id] = true
		if !rescue || byChild != 1 {
			t.Errorf("run %s executed twice, not as the killed engine's attempt 1 and a rescue's attempt 2", id)
		}
	}
	rows.Close()
	for _, id := range inFlight {
		if !twice[id] {
			t.Errorf("run %s, under way in the killed engine, did not run again", id)
		}
	}
	if len(twice) > 4 {
		t.Errorf("%d runs executed twice; the killed engine had at most 4 under way", len(twice))
	}
	t.Logf("%d runs executed twice (the killed engine's, rescued)", len(twice))
	var childRuns int
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM rt_exec WHERE pid = $1`, cpid).Scan(&childRuns)
	t.Logf("the child engine ran %d of %d before it was killed", childRuns, n)
}
