package rivertrigger_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// Benchmarks of engines on River, in a schema of their own each (they skip
// without VALET_TEST_POSTGRES). Each iteration is a whole round of
// thousands of runs and takes tens of seconds; run them once:
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test ./trigger/rivertrigger/ -run '^$' -bench . -benchtime 1x -timeout 30m
//
// The tasks are created (benchCreators goroutines calling
// Engine.CreateTask) before the engines start, due far enough ahead for
// the creation to finish first: the lead is worked out from a probe of
// the create rate. Metrics:
//
//   - lag-p50-ms, lag-p99-ms, lag-max-ms: from a run's due time to its
//     executor's call, wall time.
//   - runs/s: the runs over the time from the first executor call to the
//     last task seen COMPLETED in the database (polled every 20 ms).
//   - create/s: CreateTask calls per second from benchCreators goroutines;
//     create-seq/s: from one goroutine (the probe, 200 tasks).
//   - workers, maxconc, poll-ms: the settings (River's MaxWorkers per
//     engine, the engine's MaxConcurrent, River's FetchPollInterval).
//
// Each dispatching Store makes the runs due within the next 15 seconds
// available every second, keeping their scheduled_at, and wakes the
// workers when they are due (promote.go); River's leader, which moves
// scheduled jobs to available every 5 seconds looking 5 seconds ahead,
// finds them done. Under load the bound is throughput instead: a
// producer fetches at most MaxWorkers jobs per FetchCooldown.

const (
	benchLagTasks  = 10_000
	benchLagSpread = 10 * time.Second
	benchRPSTasks  = 5_000
	benchCreators  = 8
	benchWorkers   = 8
	benchPoolConns = 16
	benchTenants   = 10
)

// benchPool is poolIn with room for benchWorkers runs and River's own
// connections.
func benchPool(b *testing.B, schema string) *pgxpool.Pool {
	b.Helper()
	return benchPoolTraced(b, schema, nil)
}

// benchApp is the application_name of the benchmark's connections in
// schema, by which pgCPU finds their backends.
func benchApp(schema string) string { return "valet-bench-" + schema }

// benchPoolTraced is benchPool with tracer on its connections, if set.
func benchPoolTraced(b *testing.B, schema string, tracer pgx.QueryTracer) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(postgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.ConnConfig.RuntimeParams["application_name"] = benchApp(schema)
	cfg.MaxConns = benchPoolConns
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// benchRec counts the executions of each run, records their lag, and
// which engine ran them.
type benchRec struct {
	n     int
	mu    sync.Mutex
	lags  []time.Duration
	seen  map[string]int
	calls int
	first time.Time
	by    map[int]int // executions by engine
	all   chan struct{}
}

func newBenchRec(n int) *benchRec {
	return &benchRec{n: n, seen: make(map[string]int, n), by: map[int]int{}, all: make(chan struct{}),
		lags: make([]time.Duration, 0, n)}
}

func (r *benchRec) executor(engine int) trigger.Executor {
	return trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		now := time.Now()
		r.mu.Lock()
		defer r.mu.Unlock()
		r.lags = append(r.lags, now.Sub(run.DueAt))
		r.calls++
		r.by[engine]++
		if r.first.IsZero() {
			r.first = now
		}
		r.seen[run.RunID]++
		if r.seen[run.RunID] == 1 && len(r.seen) == r.n {
			close(r.all)
		}
		return trigger.ExecResult{}, nil
	})
}

func (r *benchRec) executed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// benchEngine starts an engine on s; the returned function stops it.
func benchEngine(b *testing.B, s *rivertrigger.Store, ex trigger.Executor) (*trigger.Engine, func()) {
	b.Helper()
	e, err := trigger.New(trigger.Config{
		Store:         s,
		Executors:     map[string]trigger.Executor{trigger.DefaultExecutor: ex},
		MaxConcurrent: benchWorkers,
		RunTimeout:    time.Minute,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Errorf("Run: %v", err)
			}
		})
	}
	b.Cleanup(stop)
	return e, stop
}

// newEngineNoRun returns an engine on s that is not running, for creating
// tasks.
func newEngineNoRun(b *testing.B, s *rivertrigger.Store) *trigger.Engine {
	b.Helper()
	e, err := trigger.New(trigger.Config{Store: s, Executors: map[string]trigger.Executor{
		trigger.DefaultExecutor: trigger.ExecutorFunc(func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
			b.Error("the creating engine executed a run")
			return trigger.ExecResult{}, nil
		}),
	}})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

func benchTask(tenant, id string, at time.Time) *trigger.Task {
	return &trigger.Task{
		ID: id, TenantID: tenant, Name: "bench " + id,
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: at}},
		Action:  trigger.Action{Instruction: "bench"},
	}
}

// createAll creates tasks from workers goroutines and returns how long it
// took.
func createAll(b *testing.B, e *trigger.Engine, tasks []*trigger.Task, workers int) time.Duration {
	b.Helper()
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(tasks) || failed.Load() != nil {
					return
				}
				if err := e.CreateTask(context.Background(), tasks[i]); err != nil {
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		b.Fatalf("CreateTask: %v", *p)
	}
	return time.Since(start)
}

// probeCreate measures the create rates, sequential and from benchCreators
// goroutines, with tasks of tenant "probe" due in an hour, which it
// deletes (their jobs stay scheduled an hour ahead).
func probeCreate(b *testing.B, e *trigger.Engine) (seq, conc float64) {
	b.Helper()
	far := time.Now().Add(time.Hour)
	mk := func(prefix string, k int) []*trigger.Task {
		out := make([]*trigger.Task, k)
		for i := range out {
			out[i] = benchTask("probe", fmt.Sprintf("%s%04d", prefix, i), far)
		}
		return out
	}
	seqTasks, concTasks := mk("s", 200), mk("c", 800)
	seq = float64(len(seqTasks)) / createAll(b, e, seqTasks, 1).Seconds()
	conc = float64(len(concTasks)) / createAll(b, e, concTasks, benchCreators).Seconds()
	for _, t := range append(seqTasks, concTasks...) {
		if err := e.Delete(context.Background(), "probe", t.ID); err != nil {
			b.Fatal(err)
		}
	}
	return seq, conc
}

// leadFor is how far ahead of now the first task of n is due: twice the
// time the probe predicts for creating them, plus 3 seconds for starting
// the engines.
func leadFor(n int, rate float64) time.Duration {
	return 2*time.Duration(float64(n)/rate*float64(time.Second)) + 3*time.Second
}

// waitCompleted polls the database every 20 ms until n bench tasks are
// COMPLETED and returns when it saw them, or fails b after timeout.
func waitCompleted(b *testing.B, pool *pgxpool.Pool, rec *benchRec, n int, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var c int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM valet_trigger_tasks
			WHERE tenant_id <> 'probe' AND status = 'COMPLETED'`).Scan(&c); err != nil {
			b.Fatal(err)
		}
		if c == n {
			return time.Now()
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks COMPLETED, %d runs executed, after %s", c, n, rec.executed(), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOnce fails b unless each of the n runs executed exactly once and
// the database holds n COMPLETED tasks, n succeeded runs at attempt 1 and
// n completed jobs.
func checkOnce(b *testing.B, pool *pgxpool.Pool, rec *benchRec, n int) {
	b.Helper()
	rec.mu.Lock()
	twice := 0
	for _, c := range rec.seen {
		if c != 1 {
			twice++
		}
	}
	got, calls := len(rec.seen), rec.calls
	rec.mu.Unlock()
	if got != n || calls != n || twice != 0 {
		b.Fatalf("%d runs executed (%d executions, %d runs more than once), want each of %d exactly once",
			got, calls, twice, n)
	}
	for what, q := range map[string]string{
		"COMPLETED tasks": `SELECT count(*) FROM valet_trigger_tasks WHERE tenant_id <> 'probe' AND status = 'COMPLETED'`,
		"succeeded runs at attempt 1": `SELECT count(*) FROM valet_trigger_runs
			WHERE tenant_id <> 'probe' AND run->>'status' = 'succeeded' AND (run->>'attempt')::int = 1`,
		"runs": `SELECT count(*) FROM valet_trigger_runs WHERE tenant_id <> 'probe'`,
		"completed jobs": `SELECT count(*) FROM river_job WHERE kind = 'valet_trigger_run'
			AND args->>'tenant_id' <> 'probe' AND state = 'completed'`,
		"jobs": `SELECT count(*) FROM river_job WHERE kind = 'valet_trigger_run' AND args->>'tenant_id' <> 'probe'`,
	} {
		var c int
		if err := pool.QueryRow(context.Background(), q).Scan(&c); err != nil {
			b.Fatalf("%s: %v", what, err)
		}
		if c != n {
			b.Fatalf("%s: %d, want %d", what, c, n)
		}
	}
}

func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func benchMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func reportBenchLag(b *testing.B, lags []time.Duration) {
	b.Helper()
	slices.Sort(lags)
	b.ReportMetric(benchMS(benchPercentile(lags, 50)), "lag-p50-ms")
	b.ReportMetric(benchMS(benchPercentile(lags, 99)), "lag-p99-ms")
	b.ReportMetric(benchMS(lags[len(lags)-1]), "lag-max-ms")
}

// benchRound creates n tasks due from lead ahead over spread, starts
// replicas engines each on a Store of its own on a pool of its own in one
// fresh schema, and waits for every run. It returns the lags, the time
// from the first execution to the last task COMPLETED, the create rates
// and the executions by engine.
type roundResult struct {
	lags          []time.Duration
	window        time.Duration
	seq, create   float64
	byEngine      map[int]int
	leadRemaining time.Duration
}

func benchRound(b *testing.B, n int, spread time.Duration, replicas int, cfg rivertrigger.Config) roundResult {
	b.Helper()
	schema := newSchema(b)
	stores := make([]*rivertrigger.Store, replicas)
	pools := make([]*pgxpool.Pool, replicas)
	for i := range stores {
		pools[i] = benchPool(b, schema)
		s, err := rivertrigger.New(pools[i], cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			b.Fatal(err)
		}
		stores[i] = s
	}
	creator := newEngineNoRun(b, stores[0])
	seq, conc := probeCreate(b, creator)
	lead := leadFor(n, conc)
	base := time.Now().Add(lead)
	tasks := make([]*trigger.Task, n)
	for i := range tasks {
		at := base
		if spread > 0 {
			at = base.Add(time.Duration(i) * spread / time.Duration(n))
		}
		tasks[i] = benchTask(fmt.Sprintf("tenant%d", i%benchTenants), fmt.Sprintf("t%05d", i), at)
	}
	took := createAll(b, creator, tasks, benchCreators)
	rec := newBenchRec(n)
	b.StartTimer()
	stops := make([]func(), replicas)
	for i, s := range stores {
		_, stops[i] = benchEngine(b, s, rec.executor(i))
	}
	remaining := time.Until(base)
	if remaining < time.Second {
		b.Fatalf("creating %d tasks took %s and starting the engines left %s before the first due time (lead %s)",
			n, took, remaining, lead)
	}
	timeout := time.Until(base) + spread + 5*time.Minute
	select {
	case <-rec.all:
	case <-time.After(timeout):
		b.Fatalf("%d of %d runs executed after %s", rec.executed(), n, timeout)
	}
	finished := waitCompleted(b, pools[0], rec, n, time.Minute)
	b.StopTimer()
	for _, stop := range stops {
		stop()
	}
	checkOnce(b, pools[0], rec, n)
	return roundResult{
		lags: rec.lags, window: finished.Sub(rec.first), seq: seq,
		create: float64(n) / took.Seconds(), byEngine: rec.by, leadRemaining: remaining,
	}
}

func reportSettings(b *testing.B, cfg rivertrigger.Config, replicas int) {
	b.ReportMetric(float64(benchWorkers), "workers")
	b.ReportMetric(float64(benchWorkers), "maxconc")
	b.ReportMetric(benchMS(cmp.Or(cfg.FetchPollInterval, river.FetchPollIntervalDefault)), "poll-ms")
	b.ReportMetric(benchMS(cmp.Or(cfg.FetchCooldown, river.FetchCooldownDefault)), "cooldown-ms")
	b.ReportMetric(float64(replicas), "replicas")
}

// BenchmarkFiringLagRiver: benchLagTasks one-time tasks (or fewer, for a
// light load) due over benchLagSpread, one engine.
func BenchmarkFiringLagRiver(b *testing.B) {
	postgresURL(b)
	for _, bc := range []struct {
		name           string
		n              int
		poll, cooldown time.Duration
	}{
		{"poll=100ms", benchLagTasks, 100 * time.Millisecond, 0},
		{"poll=default", benchLagTasks, 0, 0},
		{"poll=100ms/cooldown=10ms", benchLagTasks, 100 * time.Millisecond, 10 * time.Millisecond},
		// Light load, below the throughput bound of MaxWorkers per
		// FetchCooldown: the lag of scheduling and fetching alone.
		{"tasks=500/poll=100ms", 500, 100 * time.Millisecond, 0},
		{"tasks=500/poll=default", 500, 0, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := rivertrigger.Config{MaxWorkers: benchWorkers, FetchPollInterval: bc.poll, FetchCooldown: bc.cooldown}
			var lags []time.Duration
			var window time.Duration
			var seq, create float64
			b.StopTimer()
			for range b.N {
				r := benchRound(b, bc.n, benchLagSpread, 1, cfg)
				lags = append(lags, r.lags...)
				window += r.window
				seq += r.seq / float64(b.N)
				create += r.create / float64(b.N)
			}
			reportBenchLag(b, lags)
			b.ReportMetric(float64(bc.n*b.N)/window.Seconds(), "runs/s")
			b.ReportMetric(create, "create/s")
			b.ReportMetric(seq, "create-seq/s")
			reportSettings(b, cfg, 1)
		})
	}
}

// BenchmarkRunsPerSecond: benchRPSTasks one-time tasks all due at one
// instant, on 1 and on 2 engines (each on a Store and pool of its own,
// in this process, sharing the schema).
func BenchmarkRunsPerSecond(b *testing.B) {
	postgresURL(b)
	for _, cooldown := range []time.Duration{0, 10 * time.Millisecond} {
		for _, replicas := range []int{1, 2} {
			name := fmt.Sprintf("replicas=%d", replicas)
			if cooldown > 0 {
				name += "/cooldown=" + cooldown.String()
			}
			benchRunsPerSecond(b, name, replicas, rivertrigger.Config{
				MaxWorkers: benchWorkers, FetchPollInterval: 100 * time.Millisecond, FetchCooldown: cooldown,
			})
		}
	}
}

func benchRunsPerSecond(b *testing.B, name string, replicas int, cfg rivertrigger.Config) {
	b.Run(name, func(b *testing.B) {
		var window time.Duration
		var lags []time.Duration
		var create float64
		b.StopTimer()
		for range b.N {
			r := benchRound(b, benchRPSTasks, 0, replicas, cfg)
			window += r.window
			lags = append(lags, r.lags...)
			create += r.create / float64(b.N)
			b.Logf("executions by engine: %v", r.byEngine)
		}
		b.ReportMetric(float64(benchRPSTasks*b.N)/window.Seconds(), "runs/s")
		reportBenchLag(b, lags)
		b.ReportMetric(create, "create/s")
		reportSettings(b, cfg, replicas)
	})
}
