package rivertrigger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// startLog records the order in which runs start, by tenant, and how
// often each run executed.
type startLog struct {
	mu    sync.Mutex
	order []string // tenant of each start
	seen  map[string]int
}

func (l *startLog) executor(hold time.Duration) trigger.Executor {
	return trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		l.mu.Lock()
		l.order = append(l.order, run.Task.TenantID)
		l.seen[run.RunID]++
		l.mu.Unlock()
		select {
		case <-time.After(hold):
		case <-ctx.Done():
			return trigger.ExecResult{}, ctx.Err()
		}
		return trigger.ExecResult{Result: "done"}, nil
	})
}

// before returns how many runs of other tenants started before the
// first run of tenant.
func (l *startLog) before(tenant string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, t := range l.order {
		if t == tenant {
			return i, true
		}
	}
	return len(l.order), false
}

// windowEngines starts replicas engines on Stores of cfg sharing one
// fresh schema, each engine allowing cfg.MaxWorkers runs at once, all
// recording into log; it returns the first pool.
func windowEngines(t *testing.T, replicas int, cfg rivertrigger.Config, log *startLog, hold time.Duration) (*trigger.Engine, *pgxpool.Pool) {
	t.Helper()
	schema := newSchema(t)
	var first *trigger.Engine
	var firstPool *pgxpool.Pool
	for i := range replicas {
		pool := poolIn(t, schema)
		s, err := rivertrigger.New(pool, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		e, err := trigger.New(trigger.Config{
			Store:         s,
			Executors:     map[string]trigger.Executor{trigger.DefaultExecutor: log.executor(hold)},
			MaxConcurrent: cfg.MaxWorkers,
			RunTimeout:    20 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first, firstPool = e, pool
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	return first, firstPool
}

// A tenant with 40 runs due at one instant, on 2 replicas of 2 workers
// each, and another tenant with one run due at the same instant, queued
// last: River alone works them in order, so the other tenant's run
// waits for 36 or more of the busy tenant's; with a window of 4 the busy
// tenant's runs past it are held back, and the other's starts after a
// few. Either way every run executes once, at its first attempt, and
// nothing stays held.
func TestTenantWindowLetsAnotherTenantIn(t *testing.T) {
	postgresURL(t)
	const busyRuns = 40
	for _, tc := range []struct {
		name   string
		window int
		check  func(t *testing.T, before int)
	}{
		{"window=4", 4, func(t *testing.T, before int) {
			if before > 16 {
				t.Errorf("%d of the busy tenant's runs started before the other tenant's, want at most 16 (window 4)", before)
			}
		}},
		{"no window", -1, func(t *testing.T, before int) {
			if before < busyRuns-8 {
				t.Errorf("%d of the busy tenant's runs started before the other tenant's; River's order alone should put it behind %d or more",
					before, busyRuns-8)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &startLog{seen: map[string]int{}}
			cfg := rivertrigger.Config{MaxWorkers: 2, TenantWindow: tc.window, FetchPollInterval: 100 * time.Millisecond}
			e, pool := windowEngines(t, 2, cfg, log, 150*time.Millisecond)
			at := time.Now().Add(2 * time.Second).Truncate(time.Second).Add(time.Second)
			ctx := context.Background()
			for i := range busyRuns {
				if err := e.CreateTask(ctx, oneTime("busy", fmt.Sprintf("b%02d", i), at)); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.CreateTask(ctx, oneTime("other", "o", at)); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 60*time.Second, "every task COMPLETED", func() (bool, error) {
				var n int
				err := pool.QueryRow(ctx, `SELECT count(*) FROM valet_trigger_tasks WHERE status = 'COMPLETED'`).Scan(&n)
				return n == busyRuns+1, err
			})
			before, ok := log.before("other")
			if !ok {
				t.Fatal("the other tenant's run never started")
			}
			t.Logf("%d of the busy tenant's runs started before the other tenant's", before)
			tc.check(t, before)
			log.mu.Lock()
			for id, n := range log.seen {
				if n != 1 {
					t.Errorf("run %s executed %d times", id, n)
				}
			}
			if len(log.seen) != busyRuns+1 {
				t.Errorf("%d runs executed, want %d", len(log.seen), busyRuns+1)
			}
			log.mu.Unlock()
			var held, later int
			if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE metadata ? 'valet_held' AND state <> 'completed'),
					count(*) FILTER (WHERE attempt <> 1 OR state <> 'completed')
				FROM river_job WHERE kind = $1`, rivertrigger.JobKind).Scan(&held, &later); err != nil {
				t.Fatal(err)
			}
			if held != 0 || later != 0 {
				t.Errorf("%d jobs still held, %d not completed at their first attempt", held, later)
			}
		})
	}
}
