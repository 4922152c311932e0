package pgspend_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/clock/clocktest"
)

// A call refused only by the reservations of calls in flight on another
// replica waits (ReserveWait), trying again, and is made once one
// settles at its real cost.
func TestReserveWaitsForAnotherReplica(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	open := opener(t, pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}, ReserveWait: time.Minute, Clock: clk}})
	a, b := open(), open()
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "t", Source: agent.SourceTrigger, TaskID: "x"})
	held, err := a.Reserve(ctx, "t", 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.Reserve(ctx, "t", 0.5)
		done <- err
	}()
	if err := clk.AwaitTimers(context.Background(), 2); err != nil { // the wait and the next try
		t.Fatal(err)
	}
	if err := held(ctx, 0.2); err != nil {
		t.Fatal(err)
	}
	for {
		clk.Advance(time.Second) // the next try
		actx, cancel := context.WithCancel(context.Background())
		waiting := make(chan error, 1)
		go func() { waiting <- clk.AwaitTimers(actx, 2) }() // refused again: waiting once more
		select {
		case err := <-done:
			cancel()
			if err != nil {
				t.Fatalf("after the call in flight settled at $0.20: %v", err)
			}
			return
		case <-waiting:
			cancel()
		}
	}
}
