package delegate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/delegatetest"
	"github.com/valetkit/valet/clock/clocktest"
)

func newMemory(t *testing.T) delegate.Engine {
	m, err := delegate.NewMemory(delegate.MemoryConfig{Parallel: delegatetest.Parallel, RetryDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMemoryConformance(t *testing.T) {
	defer goleak.VerifyNone(t)
	delegatetest.Run(t, newMemory)
}

func TestMemoryRefusesSecondRunAndNilExecutor(t *testing.T) {
	defer goleak.VerifyNone(t)
	m := newMemory(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	exec := &delegatetest.ScriptedExecutor{}
	go func() { done <- m.Run(ctx, exec) }()
	// The first Run may not have started yet: a second is refused once it has.
	g, _ := delegate.NewGraph("t", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}})
	if err := m.Submit(ctx, g); err != nil {
		t.Fatal(err)
	}
	for {
		ch := exec.Changed()
		if len(exec.Deliveries()) == 1 {
			break
		}
		<-ch
	}
	if err := m.Run(ctx, exec); !errors.Is(err, delegate.ErrRunning) {
		t.Errorf("second Run: %v, want ErrRunning", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := m.Run(context.Background(), nil); !errors.Is(err, delegate.ErrInvalid) {
		t.Errorf("Run(nil): %v, want ErrInvalid", err)
	}
	if _, err := delegate.NewMemory(delegate.MemoryConfig{Parallel: -1}); !errors.Is(err, delegate.ErrInvalid) {
		t.Errorf("NewMemory(Parallel -1): %v, want ErrInvalid", err)
	}
}

func TestMemoryDropsOldGraphsAndResults(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := delegate.NewMemory(delegate.MemoryConfig{Retention: time.Hour, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exec := &delegatetest.ScriptedExecutor{}
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, exec) }()
	g, _ := delegate.NewGraph("t", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}})
	undelivered, _ := delegate.NewGraph("t", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}})
	if err := m.Submit(ctx, g); err != nil {
		t.Fatal(err)
	}
	for {
		ch := exec.Changed()
		if len(exec.Deliveries()) == 1 {
			break
		}
		<-ch
	}
	cancel()
	<-done
	if err := m.Submit(context.Background(), undelivered); err != nil { // never delivered: no Run
		t.Fatal(err)
	}
	if err := m.PutResult(context.Background(), delegate.Result{ID: "old", TenantID: "t", Status: delegate.ResultCompleted}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour)
	if err := m.PutResult(context.Background(), delegate.Result{ID: "new", TenantID: "t", Status: delegate.ResultCompleted}); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if _, err := m.Graph(bg, "t", g.ID); !errors.Is(err, delegate.ErrNotFound) {
		t.Errorf("delivered graph past Retention: %v, want ErrNotFound", err)
	}
	if _, err := m.Result(bg, "t", delegate.ResultID(g.ID, "a")); !errors.Is(err, delegate.ErrNotFound) {
		t.Errorf("its result past Retention: %v, want ErrNotFound", err)
	}
	if _, err := m.Result(bg, "t", "old"); !errors.Is(err, delegate.ErrNotFound) {
		t.Errorf("a result past Retention: %v, want ErrNotFound", err)
	}
	if _, err := m.Graph(bg, "t", undelivered.ID); err != nil {
		t.Errorf("an undelivered graph was dropped: %v", err)
	}
	if _, err := m.Result(bg, "t", "new"); err != nil {
		t.Errorf("a new result was dropped: %v", err)
	}
}
