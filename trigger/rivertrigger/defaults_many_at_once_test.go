package rivertrigger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// With the defaults (rivertrigger.Config{} and the engine's
// MaxConcurrent zero), two replicas run 150 runs that wait on a model at
// once: each run, of a tenant of its own, waits until 150 are under way,
// which the old default of 4 per replica never reaches. Each runs once.
func TestDefaultsRunManyWaitingRunsAtOnce(t *testing.T) {
	postgresURL(t)
	const n = 150
	var mu sync.Mutex
	running, most := 0, 0
	seen := map[string]int{}
	all := make(chan struct{})
	ex := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		running++
		most = max(most, running)
		seen[run.Task.TenantID+"/"+run.RunID]++
		if running == n {
			close(all)
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select { // the model's answer comes when all n are waiting
		case <-all:
			return trigger.ExecResult{Result: "digest"}, nil
		case <-ctx.Done():
			return trigger.ExecResult{}, ctx.Err()
		case <-time.After(45 * time.Second):
			return trigger.ExecResult{}, fmt.Errorf("only %d runs under way at once", n)
		}
	})
	schema := newSchema(t)
	var creator *trigger.Engine
	pool := poolIn(t, schema)
	for i := range 2 {
		if i > 0 {
			pool = poolIn(t, schema)
		}
		s, err := rivertrigger.New(pool, rivertrigger.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		e, err := trigger.New(trigger.Config{Store: s, Executors: map[string]trigger.Executor{trigger.DefaultExecutor: ex}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			creator = e
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
	at := time.Now().Add(5 * time.Second) // room to create them on a loaded machine
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- creator.CreateTask(context.Background(), oneTime(fmt.Sprintf("tenant%03d", i), "digest", at))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("at most %d runs under way at once, want %d", most, n)
	}
	waitFor(t, 30*time.Second, "the digests COMPLETED", func() (bool, error) {
		var c int
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM valet_trigger_tasks WHERE status = 'COMPLETED'`).Scan(&c)
		return c == n, err
	})
	mu.Lock()
	defer mu.Unlock()
	for id, c := range seen {
		if c != 1 {
			t.Errorf("run %s executed %d times", id, c)
		}
	}
}
