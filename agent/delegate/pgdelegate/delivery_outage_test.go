package pgdelegate_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/agent/delegate/delegatetest"
	"github.com/valetkit/valet/agent/delegate/pgdelegate"
)

// A delivery that fails for longer than its job's attempts last (the
// model provider down for two hours, a spend guard pausing triggered
// runs until midnight) is still made once it can be, by the engine that
// keeps running: a long-lived replica must not need a restart for the
// user to hear of a finished graph ("nothing falls through").
func TestDeliveryOutlivesItsJobAttempts(t *testing.T) {
	eng := openSchema(t, func(schema string) pgdelegate.Config {
		c := testConfig(schema)
		c.DeliverAttempts = 2
		c.MaxRetryDelay = 200 * time.Millisecond
		c.Retention = 2 * time.Second // the periodic job comes often
		return c
	})()
	exec := &delegatetest.ScriptedExecutor{FailDeliveries: 2} // the outage outlasts both attempts
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx, exec) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	g, err := delegate.NewGraph("alice", "c", []delegate.TaskSpec{{ID: "a", Task: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Submit(ctx, g); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(delegatetest.Timeout)
	for {
		got, err := eng.Graph(context.Background(), "alice", g.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Delivered {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d failed deliveries the graph (%s) was not delivered within %s while the engine ran: its delivery job was discarded and waits for a restart",
				exec.FailedDeliveries(), got.Status, delegatetest.Timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
