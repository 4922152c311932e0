package pgdelegate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/pgdelegate"
	"github.com/valetkit/valet/internal/pgtest"
)

// benchWorkers and benchCooldown are the same for the graph's engine and
// the plain River client it is measured against.
const (
	benchWorkers  = 8
	benchCooldown = 10 * time.Millisecond
)

// graphSpecs returns 1,000 trivial tasks in 10 groups of 100: in "fan"
// each group is a root and 99 tasks depending on it; in "chains" each
// group is a chain of 100, each task depending on the one before.
func graphSpecs(shape string) []delegate.TaskSpec {
	var specs []delegate.TaskSpec
	for g := range 10 {
		for i := range 100 {
			s := delegate.TaskSpec{ID: fmt.Sprintf("g%d-%d", g, i), Task: "nothing"}
			switch {
			case i == 0:
			case shape == "fan":
				s.DependsOn = []string{fmt.Sprintf("g%d-0", g)}
			default:
				s.DependsOn = []string{fmt.Sprintf("g%d-%d", g, i-1)}
			}
			specs = append(specs, s)
		}
	}
	return specs
}

// noopExec completes every task at once and signals deliveries.
type noopExec struct{ delivered chan string }

func (noopExec) RunTask(context.Context, *delegate.Graph, *delegate.Task, map[string]delegate.Result) (delegate.Output, error) {
	return delegate.Output{Text: "ok"}, nil
}

func (x noopExec) Deliver(_ context.Context, g *delegate.Graph) error {
	x.delivered <- g.ID
	return nil
}

type plainArgs struct {
	N int `json:"n"`
}

func (plainArgs) Kind() string { return "valet_bench_plain" }

type plainWorker struct {
	river.WorkerDefaults[plainArgs]
}

func (plainWorker) Work(context.Context, *river.Job[plainArgs]) error { return nil }

// BenchmarkGraph1000 runs a graph of 1,000 trivial tasks to its delivery
// on River, and 1,000 plain River jobs of a no-op worker, inserted at
// once and worked, in the same run with the same workers and fetch
// settings; graph/river is the ratio of their wall times.
func BenchmarkGraph1000(b *testing.B) {
	for _, shape := range []string{"fan", "chains"} {
		b.Run(shape, func(b *testing.B) { benchGraph(b, shape) })
	}
}

func benchGraph(b *testing.B, shape string) {
	db := pgtest.DB(b)
	schema := pgtest.Schema(b, db)
	eng, err := pgdelegate.New(db, pgdelegate.Config{Schema: schema, Parallel: benchWorkers, FetchCooldown: benchCooldown,
		FetchPollInterval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, plainWorker{})
	plain, err := river.NewClient(riverpgxv5.New(db), &river.Config{Schema: schema, Workers: workers,
		Queues: map[string]river.QueueConfig{"bench_plain": {MaxWorkers: benchWorkers}}, FetchCooldown: benchCooldown,
		FetchPollInterval: time.Second, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	completed, cancelSub := plain.Subscribe(river.EventKindJobCompleted)
	defer cancelSub()
	ctx, cancel := context.WithCancel(context.Background())
	exec := noopExec{delivered: make(chan string, 1)}
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx, exec) }()
	if err := plain.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cancel()
		<-done
		sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		_ = plain.Stop(sctx)
	}()
	specs := graphSpecs(shape)
	var graphWall, riverWall time.Duration
	b.ResetTimer()
	for range b.N {
		g, err := delegate.NewGraph("bench", "c", specs)
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := eng.Submit(ctx, g); err != nil {
			b.Fatal(err)
		}
		<-exec.delivered
		graphWall += time.Since(t0)

		params := make([]river.InsertManyParams, 1000)
		for i := range params {
			params[i] = river.InsertManyParams{Args: plainArgs{N: i}, InsertOpts: &river.InsertOpts{Queue: "bench_plain"}}
		}
		t0 = time.Now()
		if err := insertPlain(ctx, db, plain, params); err != nil {
			b.Fatal(err)
		}
		for range 1000 {
			<-completed
		}
		riverWall += time.Since(t0)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(graphWall.Milliseconds())/n, "graph-ms")
	b.ReportMetric(float64(riverWall.Milliseconds())/n, "river-ms")
	b.ReportMetric(float64(graphWall)/float64(riverWall), "graph/river")
}

func insertPlain(ctx context.Context, db interface {
	Begin(context.Context) (pgx.Tx, error)
}, c *river.Client[pgx.Tx], params []river.InsertManyParams) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := c.InsertManyTx(ctx, tx, params); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
