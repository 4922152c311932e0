package pgdelegate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/delegatetest"
	"github.com/valetkit/valet/agent/delegate/pgdelegate"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/internal/pgtest"
)

func TestNewRefusesBadConfig(t *testing.T) {
	if _, err := pgdelegate.New(nil, pgdelegate.Config{}); !errors.Is(err, delegate.ErrInvalid) {
		t.Errorf("New(nil): %v, want ErrInvalid", err)
	}
	db := pgtest.DB(t)
	for name, cfg := range map[string]pgdelegate.Config{
		"negative":        {Parallel: -1},
		"rescue too soon": {JobTimeout: time.Hour, RescueStuckJobsAfter: time.Minute},
	} {
		if _, err := pgdelegate.New(db, cfg); !errors.Is(err, delegate.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestUnmigratedSchemaSaysMigrate(t *testing.T) {
	db := pgtest.DB(t)
	e, err := pgdelegate.New(db, pgdelegate.Config{Schema: pgtest.Schema(t, db)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Result(context.Background(), "t", "x")
	if err == nil || !strings.Contains(err.Error(), "Migrate") {
		t.Errorf("Result on an unmigrated schema: %v, want a hint to run Migrate", err)
	}
}

func TestMigrateConcurrently(t *testing.T) {
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			e, err := pgdelegate.New(db, pgdelegate.Config{Schema: schema})
			if err == nil {
				err = e.Migrate(context.Background())
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Migrate: %v", err)
		}
	}
}

func TestSchemasKeepApart(t *testing.T) {
	one, two := openSchema(t, testConfig)(), openSchema(t, testConfig)()
	ctx := context.Background()
	g, _ := delegate.NewGraph("alice", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}})
	if err := one.Submit(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := two.Graph(ctx, "alice", g.ID); !errors.Is(err, delegate.ErrNotFound) {
		t.Errorf("another schema's graph: %v, want ErrNotFound", err)
	}
	if err := two.Submit(ctx, g); err != nil {
		t.Errorf("the same graph in another schema: %v", err)
	}
}

// TestOneRiverJobPerTask checks that a graph's tasks are River jobs, one
// each, inserted as they become ready, and its delivery one more: no
// other queue, no duplicates.
func TestOneRiverJobPerTask(t *testing.T) {
	eng := openSchema(t, testConfig)().(*pgdelegate.Engine)
	exec := &delegatetest.ScriptedExecutor{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx, exec) }()
	g, _ := delegate.NewGraph("alice", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}, {ID: "b", Task: "x", DependsOn: []string{"a"}},
		{ID: "c", Task: "x", DependsOn: []string{"a"}}, {ID: "d", Task: "x", DependsOn: []string{"b", "c"}}})
	if err := eng.Submit(ctx, g); err != nil {
		t.Fatal(err)
	}
	jobs := listJobs(t, eng, pgdelegate.TaskJobKind)
	if len(jobs) != 1 {
		t.Errorf("%d task jobs after Submit, want 1 (the root's)", len(jobs))
	}
	for {
		ch := exec.Changed()
		if len(exec.Deliveries()) > 0 {
			break
		}
		select {
		case <-ch:
		case <-time.After(delegatetest.Timeout):
			cancel()
			<-done
			t.Fatal("not delivered")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if n := len(listJobs(t, eng, pgdelegate.TaskJobKind)); n != 4 {
		t.Errorf("%d task jobs, want 4", n)
	}
	if n := len(listJobs(t, eng, pgdelegate.DeliverJobKind)); n != 1 {
		t.Errorf("%d delivery jobs, want 1", n)
	}
}

func listJobs(t *testing.T, eng *pgdelegate.Engine, kind string) []*rivertype.JobRow {
	t.Helper()
	res, err := eng.Client().JobList(context.Background(), river.NewJobListParams().Kinds(kind).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs
}

func TestPruneDropsOldGraphsAndResults(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	eng := openSchema(t, func(schema string) pgdelegate.Config {
		c := testConfig(schema)
		c.Clock, c.Retention = clk, time.Hour
		return c
	})().(*pgdelegate.Engine)
	exec := &delegatetest.ScriptedExecutor{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx, exec) }()
	g, _ := delegate.NewGraph("alice", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}})
	if err := eng.Submit(ctx, g); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(delegatetest.Timeout)
	for {
		ch := exec.Changed()
		got, err := eng.Graph(context.Background(), "alice", g.ID)
		if err == nil && got.Delivered {
			break
		}
		select {
		case <-ch:
		case <-time.After(50 * time.Millisecond): // Delivered is set after Deliver returns
		case <-deadline:
			cancel()
			<-done
			t.Fatal("not delivered")
		}
	}
	cancel()
	<-done
	bg := context.Background()
	undelivered, _ := delegate.NewGraph("alice", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}})
	if err := eng.Submit(bg, undelivered); err != nil {
		t.Fatal(err)
	}
	if err := eng.PutResult(bg, delegate.Result{ID: "old", TenantID: "alice", Status: delegate.ResultCompleted}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	if err := eng.PutResult(bg, delegate.Result{ID: "new", TenantID: "alice", Status: delegate.ResultCompleted}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Prune(bg); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Graph(bg, "alice", g.ID); !errors.Is(err, delegate.ErrNotFound) {
		t.Errorf("delivered graph past Retention: %v, want ErrNotFound", err)
	}
	if _, err := eng.Result(bg, "alice", delegate.ResultID(g.ID, "a")); !errors.Is(err, delegate.ErrNotFound) {
		t.Errorf("its result: %v, want ErrNotFound", err)
	}
	if _, err := eng.Result(bg, "alice", "old"); !errors.Is(err, delegate.ErrNotFound) {
		t.Errorf("old result: %v, want ErrNotFound", err)
	}
	if _, err := eng.Graph(bg, "alice", undelivered.ID); err != nil {
		t.Errorf("an undelivered graph was dropped: %v", err)
	}
	if _, err := eng.Result(bg, "alice", "new"); err != nil {
		t.Errorf("a new result was dropped: %v", err)
	}
}
