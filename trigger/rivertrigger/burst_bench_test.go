package rivertrigger_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// The morning burst (issue 25): runs that wait on a model for a second
// each, on two engines (replicas) sharing one schema, each on a Store
// and a pool (benchPoolConns connections) of its own, in this process.
// They skip without VALET_TEST_POSTGRES and take real time; run them
// once:
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test ./trigger/rivertrigger/ -run '^$' -bench 'Burst|LightLoad' -benchtime 1x -timeout 60m
//
// VALET_BURST_TASKS sets the morning burst's size (default 10,000; the
// old defaults take about 23 minutes over it, so measure them on fewer)
// and VALET_BURST_BUSY the busy tenant's (default 5,000). Metrics:
//
//   - last-done-s: from the burst's due time to its last task seen
//     COMPLETED in the database (polled every 20 ms); ideal-s: what the
//     configured concurrency allows, ceil(runs / (replicas × runs at
//     once)) × 1 s, as if every run started the instant a worker was
//     free; x-ideal: their ratio.
//   - lag-p50-ms, lag-p99-ms, lag-max-ms: from a run's due time to its
//     executor's call.
//   - other-delay-ms: from the other tenant's due time to its run's
//     start, while the busy tenant's burst is under way.
//   - cpu-ms/run: this process's CPU time (user+sys: both engines, River,
//     pgx; PostgreSQL's is not in it) per run, from the engines' start to
//     the last task COMPLETED.
//   - queries/run: the statements the engines' pools sent meanwhile
//     (BEGIN and COMMIT included) per run; VALET_BURST_QUERIES=1 lists
//     them by statement on stderr.
//   - pg-cpu-ms/run: the CPU time (user+sys) of the PostgreSQL backends
//     of those pools meanwhile, per run, when the server runs on this
//     machine (read from /proc; the benchmark polls on a pool of its
//     own, not counted).
//   - conc, replicas: runs at once per replica (the lesser of River's
//     MaxWorkers and the engine's MaxConcurrent), engines.

const burstRunTime = time.Second

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// burstRec records, for each run, when it started and ended.
type burstRec struct {
	mu      sync.Mutex
	n       int
	starts  map[string]time.Time // by tenant/run
	lags    map[string]time.Duration
	calls   int
	ended   int
	lastEnd time.Time
	all     chan struct{} // closed when n runs ended
}

func newBurstRec(n int) *burstRec {
	return &burstRec{n: n, starts: make(map[string]time.Time, n), lags: make(map[string]time.Duration, n),
		all: make(chan struct{})}
}

// executor waits burstRunTime, as a model call would, after recording
// the run's start.
func (r *burstRec) executor() trigger.Executor {
	return trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		now := time.Now()
		key := run.Task.TenantID + "/" + run.RunID
		r.mu.Lock()
		r.calls++
		if _, ok := r.starts[key]; !ok {
			r.starts[key], r.lags[key] = now, now.Sub(run.DueAt)
		}
		r.mu.Unlock()
		select {
		case <-time.After(burstRunTime):
		case <-ctx.Done():
			return trigger.ExecResult{}, ctx.Err()
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ended++
		r.lastEnd = time.Now()
		if r.ended == r.n {
			close(r.all)
		}
		return trigger.ExecResult{Result: "digest"}, nil
	})
}

// burstSetup configures one round: the stores' Config and the engines'
// MaxConcurrent (zero: the defaults).
type burstSetup struct {
	cfg           rivertrigger.Config
	maxConcurrent int
}

// conc is how many runs one replica runs at once under s.
func (s burstSetup) conc() int {
	w, c := s.cfg.MaxWorkers, s.maxConcurrent
	if w == 0 {
		w = trigger.DefaultMaxConcurrent
	}
	if c == 0 {
		c = trigger.DefaultMaxConcurrent
	}
	return min(w, c)
}

type burstResult struct {
	rec      *burstRec
	queries  *queryCounter // the engines' statements from their start to the last task COMPLETED
	pgCPU    time.Duration // the CPU time of PostgreSQL's backends of the engines' pools meanwhile; -1: unknown
	lastDone time.Duration // from first's due time to the last task COMPLETED
	cpu      time.Duration // this process's user+sys time from the engines' start to the last task COMPLETED
}

// cpuTime is this process's user+sys time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// burstRound creates tasks (made by mk from the time they are due at)
// in a fresh schema, starts replicas engines on it and waits until every
// run ended and every task is COMPLETED.
func burstRound(b *testing.B, replicas int, setup burstSetup, n int, mk func(at time.Time) []*trigger.Task) burstResult {
	b.Helper()
	schema := newSchema(b)
	stores := make([]*rivertrigger.Store, replicas)
	pools := make([]*pgxpool.Pool, replicas)
	queries := newQueryCounter()
	for i := range stores {
		pools[i] = benchPoolTraced(b, schema, queries)
		s, err := rivertrigger.New(pools[i], setup.cfg)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			b.Fatal(err)
		}
		stores[i] = s
	}
	creator := newEngineNoRun(b, stores[0])
	_, rate := probeCreate(b, creator)
	base := time.Now().Add(leadFor(n, rate))
	tasks := mk(base)
	took := createAll(b, creator, tasks, benchCreators)
	rec := newBurstRec(len(tasks))
	poller := poolIn(b, schema) // apart from the engines' pools, so that pg-cpu-ms/run leaves its polling out
	pg0, pgOK := pgCPU(b, pools[0], benchApp(schema))
	cpu0 := cpuTime(b)
	queries.on.Store(true)
	var stops []func()
	for _, s := range stores {
		e, err := trigger.New(trigger.Config{
			Store: s, Executors: map[string]trigger.Executor{trigger.DefaultExecutor: rec.executor()},
			MaxConcurrent: setup.maxConcurrent, RunTimeout: time.Minute,
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
		stops = append(stops, stop)
	}
	if remaining := time.Until(base); remaining < time.Second {
		b.Fatalf("creating %d tasks took %s and left %s before they were due", len(tasks), took, remaining)
	}
	ideal := time.Duration(math.Ceil(float64(len(tasks))/float64(replicas*setup.conc()))) * burstRunTime
	timeout := time.Until(base) + 3*ideal + 2*time.Minute
	select {
	case <-rec.all:
	case <-time.After(timeout):
		rec.mu.Lock()
		defer rec.mu.Unlock()
		b.Fatalf("%d of %d runs ended after %s", rec.ended, rec.n, timeout)
	}
	var done time.Time
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var c int
		if err := poller.QueryRow(context.Background(), `SELECT count(*) FROM valet_trigger_tasks
			WHERE tenant_id <> 'probe' AND status = 'COMPLETED'`).Scan(&c); err != nil {
			b.Fatal(err)
		}
		if c == len(tasks) {
			done = time.Now()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks COMPLETED a minute after their runs ended", c, len(tasks))
		}
	}
	cpu := cpuTime(b) - cpu0
	queries.on.Store(false)
	pgUsed := time.Duration(-1)
	if pg1, ok := pgCPU(b, pools[0], benchApp(schema)); ok && pgOK {
		pgUsed = pgCPUSince(pg0, pg1)
	}
	for _, stop := range stops {
		stop()
	}
	rec.mu.Lock()
	calls, runs := rec.calls, len(rec.starts)
	rec.mu.Unlock()
	if calls != len(tasks) || runs != len(tasks) {
		b.Fatalf("%d executions of %d runs, want each of %d once", calls, runs, len(tasks))
	}
	var first int
	if err := pools[0].QueryRow(context.Background(), `SELECT count(*) FROM valet_trigger_runs
		WHERE tenant_id <> 'probe' AND run->>'status' = 'succeeded' AND (run->>'attempt')::int = 1`).Scan(&first); err != nil {
		b.Fatal(err)
	}
	if first != len(tasks) {
		b.Fatalf("%d runs succeeded at their first attempt, want %d", first, len(tasks))
	}
	return burstResult{rec: rec, queries: queries, pgCPU: pgUsed, lastDone: done.Sub(base), cpu: cpu}
}

func reportBurst(b *testing.B, res burstResult, n, replicas int, setup burstSetup) {
	ideal := time.Duration(math.Ceil(float64(n)/float64(replicas*setup.conc()))) * burstRunTime
	b.ReportMetric(res.lastDone.Seconds(), "last-done-s")
	b.ReportMetric(ideal.Seconds(), "ideal-s")
	b.ReportMetric(res.lastDone.Seconds()/ideal.Seconds(), "x-ideal")
	reportLags(b, res.rec)
	b.ReportMetric(float64(res.cpu.Microseconds())/1000/float64(n), "cpu-ms/run")
	b.ReportMetric(float64(res.queries.total.Load())/float64(n), "queries/run")
	if res.pgCPU >= 0 {
		b.ReportMetric(float64(res.pgCPU.Microseconds())/1000/float64(n), "pg-cpu-ms/run")
	}
	if os.Getenv("VALET_BURST_QUERIES") != "" {
		res.queries.report(b, n)
	}
	b.ReportMetric(float64(setup.conc()), "conc")
	b.ReportMetric(float64(replicas), "replicas")
}

func reportLags(b *testing.B, rec *burstRec) {
	rec.mu.Lock()
	lags := make([]time.Duration, 0, len(rec.lags))
	for _, l := range rec.lags {
		lags = append(lags, l)
	}
	rec.mu.Unlock()
	reportBenchLag(b, lags)
}

// oldDefaults are the defaults before issue 25: 4 runs at once per
// replica.
var oldDefaults = burstSetup{cfg: rivertrigger.Config{MaxWorkers: 4}, maxConcurrent: 4}

// BenchmarkMorningBurst: VALET_BURST_TASKS tenants (10,000) with a
// digest each, all due at one instant, on 2 replicas, each run waiting
// burstRunTime.
func BenchmarkMorningBurst(b *testing.B) {
	postgresURL(b)
	n := envInt("VALET_BURST_TASKS", 10_000)
	for _, bc := range []struct {
		name  string
		setup burstSetup
	}{
		{"defaults", burstSetup{}},
		{"defaults-no-window", burstSetup{cfg: rivertrigger.Config{TenantWindow: -1}}}, // what the window costs
		{"old-defaults", oldDefaults},
	} {
		b.Run(fmt.Sprintf("%s/tasks=%d", bc.name, n), func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				res := burstRound(b, 2, bc.setup, n, func(at time.Time) []*trigger.Task {
					tasks := make([]*trigger.Task, n)
					for i := range tasks {
						tasks[i] = benchTask(fmt.Sprintf("tenant%05d", i), "digest", at)
					}
					return tasks
				})
				reportBurst(b, res, n, 2, bc.setup)
			}
		})
	}
}

// BenchmarkTenantBurst: one tenant's VALET_BURST_BUSY runs (5,000) due
// at one instant and another tenant's single run due 2 s later, while
// the burst is under way, on 2 replicas with the defaults: River's order
// alone (no window) against the tenant window.
func BenchmarkTenantBurst(b *testing.B) {
	postgresURL(b)
	busy := envInt("VALET_BURST_BUSY", 5_000)
	for _, bc := range []struct {
		name  string
		setup burstSetup
	}{
		{"window=default", burstSetup{}},
		{"no-window", burstSetup{cfg: rivertrigger.Config{TenantWindow: -1}}},
	} {
		b.Run(fmt.Sprintf("%s/busy=%d", bc.name, busy), func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				var otherDue time.Time
				res := burstRound(b, 2, bc.setup, busy+1, func(at time.Time) []*trigger.Task {
					tasks := make([]*trigger.Task, 0, busy+1)
					for i := range busy {
						tasks = append(tasks, benchTask("busy", fmt.Sprintf("t%05d", i), at))
					}
					otherDue = at.Add(2 * time.Second)
					return append(tasks, benchTask("other", "digest", otherDue))
				})
				res.rec.mu.Lock()
				var other time.Duration
				for k, l := range res.rec.lags {
					if len(k) > 6 && k[:6] == "other/" {
						other = l
					}
				}
				res.rec.mu.Unlock()
				b.ReportMetric(float64(other.Milliseconds()), "other-delay-ms")
				reportBurst(b, res, busy+1, 2, bc.setup)
			}
		})
	}
}

// BenchmarkLightLoadLag: 100 tenants' runs due over 10 s on 2 replicas,
// far below what they run at once: the firing lag of River's scheduling
// and fetching alone, with the defaults (FetchPollInterval 1 s).
func BenchmarkLightLoadLag(b *testing.B) {
	postgresURL(b)
	const n, spread = 100, 10 * time.Second
	for _, bc := range []struct {
		name  string
		setup burstSetup
	}{
		{"defaults", burstSetup{}},
		{"old-defaults", oldDefaults},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.StopTimer()
			var lags []time.Duration
			for range b.N {
				res := burstRound(b, 2, bc.setup, n, func(at time.Time) []*trigger.Task {
					tasks := make([]*trigger.Task, n)
					for i := range tasks {
						tasks[i] = benchTask(fmt.Sprintf("tenant%03d", i), "digest", at.Add(time.Duration(i)*spread/n))
					}
					return tasks
				})
				res.rec.mu.Lock()
				for _, l := range res.rec.lags {
					lags = append(lags, l)
				}
				res.rec.mu.Unlock()
			}
			slices.Sort(lags)
			reportBenchLag(b, lags)
			b.ReportMetric(float64(bc.setup.conc()), "conc")
		})
	}
}
