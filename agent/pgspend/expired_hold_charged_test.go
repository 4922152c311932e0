package pgspend_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/clock/clocktest"
)

// A hold whose settlement never came is charged at its reserved amount
// once its TTL passes; a settlement arriving after that adds only what
// its cost exceeds the reservation by, so nothing is counted twice.
func TestExpiredHoldIsChargedOnceAndALateSettlementAddsOnlyTheExcess(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	open := opener(t, pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 10}, Clock: clk}})
	g, other := open(), open() // the sweep may run on another replica
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "a", Source: agent.SourceTrigger, TaskID: "t"})
	cheap, err := g.Reserve(ctx, "a", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	dear, err := g.Reserve(ctx, "a", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(agent.DefaultReserveTTL + time.Minute)
	for range 2 { // two sweeps charge each hold once
		if err := other.Check(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	spent := func() float64 {
		day, _, err := g.Spent(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return day
	}
	if got := spent(); math.Abs(got-1) > 1e-9 {
		t.Fatalf("two expired holds of $0.50 charged $%.2f, want $1.00", got)
	}
	if err := cheap(ctx, 0.3); err != nil { // cost below its hold: already counted
		t.Fatal(err)
	}
	if err := dear(ctx, 0.7); err != nil { // cost above its hold: the excess added
		t.Fatal(err)
	}
	if got := spent(); math.Abs(got-1.2) > 1e-9 {
		t.Fatalf("after late settlements of $0.30 and $0.70 the day counts $%.2f, want $1.20 (the holds' $1.00 and $0.20 beyond one)", got)
	}
}
