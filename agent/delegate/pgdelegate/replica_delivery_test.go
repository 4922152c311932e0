package pgdelegate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/delegatetest"
)

// Two replicas on one schema deliver each ended graph once: the executor's
// Deliver (which hands the graph's end to the coordinator's conversation
// and calls OnBackground) is called once per graph across them.
func TestReplicasDeliverEachGraphOnce(t *testing.T) {
	open := openSchema(t, testConfig)
	one, two := open(), open()
	exec := &delegatetest.ScriptedExecutor{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	for _, e := range []delegate.Engine{one, two} {
		go func() { done <- e.Run(ctx, exec) }()
	}
	defer func() {
		cancel()
		for range 2 {
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}()
	var ids []string
	for i := range 12 {
		g, err := delegate.NewGraph("alice", fmt.Sprintf("c%d", i), []delegate.TaskSpec{{ID: "a", Task: "x"}, {ID: "b", Task: "y", DependsOn: []string{"a"}}})
		if err != nil {
			t.Fatal(err)
		}
		eng := []delegate.Engine{one, two}[i%2]
		if err := eng.Submit(ctx, g); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	deadline := time.Now().Add(delegatetest.Timeout)
	for _, id := range ids {
		for {
			g, err := one.Graph(context.Background(), "alice", id)
			if err != nil {
				t.Fatal(err)
			}
			if g.Delivered {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("graph %s not delivered: %+v", id, g)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	count := map[string]int{}
	for _, g := range exec.Deliveries() {
		count[g.ID]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("graph %s delivered %d times by two replicas, want once", id, count[id])
		}
	}
}
