package rivertrigger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// dyingStore is a Store whose process dies the moment the engine, having
// recorded a run, delivers its chained run (Enqueue): die stops the
// engine, and nothing after the record happens.
type dyingStore struct {
	*rivertrigger.Store
	die func()
}

func (d dyingStore) Enqueue(ctx context.Context, due trigger.Due) error {
	d.die()
	return errors.New("the process died")
}

// A run whose route chains to another task, recorded on a replica that
// dies right after the record (before its delivery along the route),
// still has its chained run: it was queued in the transaction that
// recorded the run, and another replica runs it, once, told of the run
// before it.
func TestChainedRunSurvivesDeathAfterTheRecord(t *testing.T) {
	pool := poolIn(t, newSchema(t))
	ctx := context.Background()
	var mu sync.Mutex
	var ran []trigger.ExecRun
	exec := trigger.ExecutorFunc(func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		mu.Lock()
		ran = append(ran, run)
		mu.Unlock()
		return trigger.ExecResult{Result: "output of " + run.Task.ID}, nil
	})
	newEngine := func(wrap func(*rivertrigger.Store) trigger.Store) *trigger.Engine {
		s, err := rivertrigger.New(pool, rivertrigger.Config{FetchPollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		e, err := trigger.New(trigger.Config{Store: wrap(s), RunTimeout: 10 * time.Second,
			Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec}})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	runCtx, die := context.WithCancel(ctx)
	a := newEngine(func(s *rivertrigger.Store) trigger.Store { return dyingStore{s, die} })
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() { die(); <-done }()

	second := &trigger.Task{ID: "second", TenantID: "acme", Name: "second",
		Trigger: trigger.Trigger{Kind: trigger.KindEvent, Source: "none"}, Action: trigger.Action{Instruction: "then this"}}
	if err := a.CreateTask(ctx, second); err != nil {
		t.Fatal(err)
	}
	first := oneTime("acme", "first", time.Now().Add(time.Second))
	first.Route = trigger.Route{Kind: trigger.RouteChain, Next: "second", PassOutput: true}
	if err := a.CreateTask(ctx, first); err != nil {
		t.Fatal(err)
	}
	<-runCtx.Done() // A recorded first's run and died delivering it
	<-done
	done <- nil
	if task, err := a.Get(ctx, "acme", "first"); err != nil || task.Status != trigger.StatusCompleted {
		t.Fatalf("first after A died: %+v, %v; want COMPLETED (recorded)", task, err)
	}

	b := newEngine(func(s *rivertrigger.Store) trigger.Store { return s })
	engineRun(t, b)
	waitFor(t, 20*time.Second, "the chained run", func() (bool, error) {
		runs, err := b.Runs(ctx, "acme", "second", 0)
		return len(runs) == 1 && runs[0].Status == trigger.RunSucceeded, err
	})
	firstRuns, err := b.Runs(ctx, "acme", "first", 0)
	if err != nil || len(firstRuns) != 1 {
		t.Fatalf("first's runs: %+v, %v", firstRuns, err)
	}
	time.Sleep(500 * time.Millisecond) // a second chained run would have run by now
	mu.Lock()
	defer mu.Unlock()
	var chained []trigger.ExecRun
	for _, r := range ran {
		if r.Task.ID == "second" {
			chained = append(chained, r)
		}
	}
	if len(chained) != 1 || chained[0].Previous == nil || chained[0].Previous.RunID != firstRuns[0].ID ||
		chained[0].Previous.Output != "output of first" || chained[0].RunID != trigger.ChainRunID("second", firstRuns[0].ID) {
		t.Fatalf("chained runs: %+v; want one, after first's run with its output", chained)
	}
}
