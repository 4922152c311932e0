package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock/clocktest"
)

// Calls reserved before midnight and settled after it count in the new
// day, whose reservations never saw them: the new day must still end at
// most one call's reservation above its limit.
func TestSpendLimitsCallsInFlightAtMidnightNeverOvershootTheNewDay(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 25, 23, 59, 0, 0, time.UTC))
	const limit, call = 1.0, 0.25
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: limit}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "a", Source: agent.SourceTrigger, TaskID: "t"})
	var settles []agent.SettleSpend
	reserveAll := func() {
		for range 8 {
			s, err := g.Reserve(ctx, "a", call)
			if err != nil {
				return
			}
			settles = append(settles, s)
		}
	}
	reserveAll()
	clk.Advance(2 * time.Minute) // the new day, the old calls still in flight
	reserveAll()
	for _, s := range settles {
		if err := s(ctx, call); err != nil {
			t.Fatal(err)
		}
	}
	if day, _ := g.Spent("a"); day > limit+call+1e-9 {
		t.Fatalf("the new day spent $%.2f against a $%.2f limit: overshot by $%.2f, more than one call's reservation ($%.2f)", day, limit, day-limit, call)
	}
}
