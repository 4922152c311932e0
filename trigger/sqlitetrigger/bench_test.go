package sqlitetrigger_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// BenchmarkRiverSQLiteVsPostgres measures, in one run, task creation and
// due runs per second on River: this package's store on an SQLite file
// (one connection, River's advice) beside rivertrigger on PostgreSQL
// (VALET_TEST_POSTGRES; the benchmark skips without it), the same engine
// and settings on both (River's MaxWorkers 50, FetchCooldown 20 ms,
// FetchPollInterval 100 ms, a no-op executor). The file is opened with
// sqlitex.DSNParams (synchronous FULL, SQLite's default: every commit
// waits for the disk), and again with synchronous(NORMAL) added
// ("sqlite-normal"). Each iteration is one round on each backend, in
// turn. Run it once:
//
//	VALET_TEST_POSTGRES=… go test -run '^$' -bench RiverSQLiteVsPostgres -benchtime 3x ./trigger/sqlitetrigger/
//
// Metrics: create/s is Engine.CreateTask calls per second from one
// goroutine (each a transaction: the task and its River job); runs/s is
// benchDue runs over the time from the first executor call to the last
// run recorded (Finish committed); the ratios are SQLite's over
// PostgreSQL's.
func BenchmarkRiverSQLiteVsPostgres(b *testing.B) {
	pgtest.URL(b)
	var createS, createN, createP, runsS, runsN, runsP float64
	for b.Loop() {
		c, r := benchRound(b, sqliteBackend(b, ""))
		createS, runsS = createS+c, runsS+r
		c, r = benchRound(b, sqliteBackend(b, "_pragma=synchronous(NORMAL)"))
		createN, runsN = createN+c, runsN+r
		c, r = benchRound(b, postgresBackend(b))
		createP, runsP = createP+c, runsP+r
	}
	n := float64(b.N)
	b.ReportMetric(createS/n, "sqlite-create/s")
	b.ReportMetric(createN/n, "sqlite-normal-create/s")
	b.ReportMetric(createP/n, "pg-create/s")
	b.ReportMetric(createS/createP, "create-ratio")
	b.ReportMetric(createN/createP, "normal-create-ratio")
	b.ReportMetric(runsS/n, "sqlite-runs/s")
	b.ReportMetric(runsN/n, "sqlite-normal-runs/s")
	b.ReportMetric(runsP/n, "pg-runs/s")
	b.ReportMetric(runsS/runsP, "runs-ratio")
	b.ReportMetric(runsN/runsP, "normal-runs-ratio")
}

const (
	benchCreate = 500 // tasks created per round for create/s
	benchDue    = 500 // runs due at once per round for runs/s
)

// benchStore is a Dispatcher store with every interface of its backend
// (the engine finds them by assertion) whose recorded runs are counted.
type benchStore interface {
	trigger.Dispatcher
	trigger.ExpiryDispatcher
	trigger.NotifyDispatcher
	trigger.RunSettler
}

// counting counts the runs Finish records as succeeded.
type counting struct {
	benchStore
	done atomic.Int64
	all  chan struct{}
	want int64
}

func (c *counting) Finish(ctx context.Context, r trigger.Run, t *trigger.Task) error {
	err := c.benchStore.Finish(ctx, r, t)
	if err == nil && r.Status == trigger.RunSucceeded && c.done.Add(1) == c.want {
		close(c.all)
	}
	return err
}

// sqliteBackend opens a new file with sqlitex.DSNParams and extra.
func sqliteBackend(b *testing.B, extra string) benchStore {
	b.Helper()
	db, err := sql.Open("sqlite", sqlitetest.DSN(filepath.Join(b.TempDir(), "valet.db"), extra))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	s, err := sqlitetrigger.New(db, sqlitetrigger.Config{MaxWorkers: 50, FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

func postgresBackend(b *testing.B) benchStore {
	b.Helper()
	pool := pgtest.PoolIn(b, pgtest.Schema(b, pgtest.DB(b)), 16)
	s, err := rivertrigger.New(pool, rivertrigger.Config{MaxWorkers: 50, FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// benchRound creates benchCreate tasks due in an hour (create/s), then
// benchDue tasks due together after their creation, and runs them
// (runs/s).
func benchRound(b *testing.B, s benchStore) (createPerS, runsPerS float64) {
	b.Helper()
	ctx := context.Background()
	c := &counting{benchStore: s, all: make(chan struct{}), want: benchDue}
	var first sync.Once
	var start time.Time
	e, err := trigger.New(trigger.Config{Store: c, MaxConcurrent: 64, RunTimeout: 20 * time.Second,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
			func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
				first.Do(func() { start = time.Now() })
				return trigger.ExecResult{Result: "ok"}, nil
			})}})
	if err != nil {
		b.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	t0 := time.Now()
	for i := range benchCreate {
		if err := e.CreateTask(ctx, oneTime(fmt.Sprintf("c%d", i%7), fmt.Sprintf("later%04d", i), later)); err != nil {
			b.Fatal(err)
		}
	}
	created := time.Since(t0)
	createPerS = benchCreate / created.Seconds()
	// Due after the creation of benchDue more at the rate just measured,
	// with room to spare for a loaded machine.
	due := time.Now().Add(2*time.Duration(float64(created)*benchDue/benchCreate) + 2*time.Second)
	for i := range benchDue {
		if err := e.CreateTask(ctx, oneTime(fmt.Sprintf("d%d", i%7), fmt.Sprintf("due%04d", i), due)); err != nil {
			b.Fatal(err)
		}
	}
	if time.Now().After(due) {
		b.Fatal("creating the due tasks took past their due time")
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	select {
	case <-c.all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d runs recorded after 5 minutes", c.done.Load(), benchDue)
	}
	return createPerS, benchDue / time.Since(start).Seconds()
}
