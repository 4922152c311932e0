package trigger_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/clock"

	"github.com/valetkit/valet/trigger"
)

// The firing-lag benchmarks measure, on the real clock, the time between a
// run's due time and the moment its executor is called, over a round of
// benchLagTasks one-time tasks (fewer for a light load). Each iteration is
// a whole round and takes several seconds; run them once:
//
//	go test ./trigger/ -run '^$' -bench FiringLagMemory -benchtime 1x
//
// Metrics: lag-p50-ms, lag-p99-ms and lag-max-ms over every run of every
// iteration; runs/s, the runs over the time from the first executor call
// to the last task COMPLETED (bounded by how fast the tasks fall due when
// they are spread out); create/s, Engine.CreateTask calls per second;
// maxconc, the engine's MaxConcurrent.

const benchLagTasks = 10_000

// benchRecorder counts the executions of each run and records their lag.
type benchRecorder struct {
	n    int
	mu   sync.Mutex
	lags []time.Duration
	seen map[string]int
	// calls counts every execution; first is the first one's time.
	calls int
	first time.Time
	all   chan struct{} // closed when n distinct runs executed
}

func newBenchRecorder(n int) *benchRecorder {
	return &benchRecorder{n: n, lags: make([]time.Duration, 0, n), seen: make(map[string]int, n), all: make(chan struct{})}
}

func (r *benchRecorder) Execute(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lags = append(r.lags, now.Sub(run.DueAt))
	r.calls++
	if r.first.IsZero() {
		r.first = now
	}
	r.seen[run.RunID]++
	if r.seen[run.RunID] == 1 && len(r.seen) == r.n {
		close(r.all)
	}
	return trigger.ExecResult{}, nil
}

// check fails b unless each of the n runs executed exactly once.
func (r *benchRecorder) check(b *testing.B) {
	b.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	twice := 0
	for _, c := range r.seen {
		if c != 1 {
			twice++
		}
	}
	if len(r.seen) != r.n || r.calls != r.n || twice != 0 {
		b.Fatalf("%d runs executed (%d executions, %d runs more than once), want each of %d exactly once",
			len(r.seen), r.calls, twice, r.n)
	}
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted d.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportLag reports the lag percentiles of lags, which it sorts.
func reportLag(b *testing.B, lags []time.Duration) {
	b.Helper()
	slices.Sort(lags)
	b.ReportMetric(ms(percentile(lags, 50)), "lag-p50-ms")
	b.ReportMetric(ms(percentile(lags, 99)), "lag-p99-ms")
	b.ReportMetric(ms(lags[len(lags)-1]), "lag-max-ms")
}

func BenchmarkFiringLagMemory(b *testing.B) {
	for _, bc := range []struct {
		name          string
		n             int
		spread        time.Duration // the due times are spread evenly over it
		maxConcurrent int
	}{
		{"spread=5s/maxconc=16", benchLagTasks, 5 * time.Second, 16},
		{"spread=5s/maxconc=4", benchLagTasks, 5 * time.Second, 4},
		{"burst/maxconc=16", benchLagTasks, 0, 16}, // all due at one instant: throughput
		// Light load, which the engine keeps up with: the lag of
		// scheduling alone.
		{"tasks=1000/spread=5s/maxconc=16", 1000, 5 * time.Second, 16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchFiringLagMemory(b, bc.n, bc.spread, bc.maxConcurrent)
		})
	}
}

func benchFiringLagMemory(b *testing.B, n int, spread time.Duration, maxConcurrent int) {
	const tenants = 10
	var lags []time.Duration
	var window, creating time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		rec := newBenchRecorder(n)
		e, err := trigger.New(trigger.Config{
			Store:         trigger.NewMemoryStore(),
			Clock:         clock.System{},
			Executors:     map[string]trigger.Executor{trigger.DefaultExecutor: rec},
			MaxConcurrent: maxConcurrent,
		})
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		lead := time.Second // creating 10,000 tasks in memory takes well under it
		base := time.Now().Add(lead)
		created := time.Now()
		for i := range n {
			at := base
			if spread > 0 {
				at = base.Add(time.Duration(i) * spread / time.Duration(n))
			}
			task := &trigger.Task{
				ID: fmt.Sprintf("t%05d", i), TenantID: fmt.Sprintf("tenant%d", i%tenants), Name: "bench",
				Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: at}},
				Action:  trigger.Action{Instruction: "bench"},
			}
			if err := e.CreateTask(ctx, task); err != nil {
				b.Fatal(err)
			}
		}
		creating += time.Since(created)
		if !time.Now().Before(base) {
			b.Fatalf("creating %d tasks took %s, past the first due time %s after the start", n, time.Since(created), lead)
		}

		b.StartTimer()
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- e.Run(rctx) }()
		stop := func() error { cancel(); return <-done }
		timeout := spread + 2*time.Minute
		select {
		case <-rec.all:
		case <-time.After(time.Until(base) + timeout):
			_ = stop()
			rec.mu.Lock()
			got := len(rec.seen)
			rec.mu.Unlock()
			b.Fatalf("%d of %d runs executed within %s of the first due time", got, n, timeout)
		}
		// Every task COMPLETED, each with one succeeded run.
		var finished time.Time
		for {
			c := 0
			for k := range tenants {
				ts, err := e.List(ctx, fmt.Sprintf("tenant%d", k), trigger.StatusCompleted)
				if err != nil {
					b.Fatal(err)
				}
				c += len(ts)
			}
			if c == n {
				finished = time.Now()
				break
			}
			if time.Since(base) > timeout {
				_ = stop()
				b.Fatalf("%d of %d tasks COMPLETED within %s of the first due time", c, n, timeout)
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		if err := stop(); err != nil {
			b.Fatalf("Run: %v", err)
		}
		rec.check(b)
		for i := range n {
			id := fmt.Sprintf("t%05d", i)
			runs, err := e.Runs(ctx, fmt.Sprintf("tenant%d", i%tenants), id, 0)
			if err != nil {
				b.Fatal(err)
			}
			if len(runs) != 1 || runs[0].Status != trigger.RunSucceeded || runs[0].Attempt != 1 {
				b.Fatalf("task %s: runs %+v, want one succeeded at attempt 1", id, runs)
			}
		}
		lags = append(lags, rec.lags...)
		window += finished.Sub(rec.first)
	}
	reportLag(b, lags)
	b.ReportMetric(float64(n*b.N)/window.Seconds(), "runs/s")
	b.ReportMetric(float64(n*b.N)/creating.Seconds(), "create/s")
	b.ReportMetric(float64(maxConcurrent), "maxconc")
}
