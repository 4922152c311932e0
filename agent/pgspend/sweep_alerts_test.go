package pgspend_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/clock/clocktest"
)

// Holds whose settlement never came are charged by the expiry sweep; a
// charge that passes a threshold is alerted then, by the sweep, once
// across replicas sweeping together — not at some later Record.
func TestExpirySweepAlertsTheThresholdsItsChargePasses(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var heard []agent.SpendAlert
	open := opener(t, pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{
		Tenant: agent.Limits{DailyUSD: 10}, Alerts: []float64{0.5}, Clock: clk,
		Observer: func(a agent.SpendAlert) {
			mu.Lock()
			heard = append(heard, a)
			mu.Unlock()
		},
	}})
	g, other := open(), open()
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "a", Source: agent.SourceTrigger, TaskID: "t"})
	for range 3 { // $6 held, never settled (the process died)
		if _, err := g.Reserve(ctx, "a", 2); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	if len(heard) != 0 {
		t.Fatalf("alerts before anything was charged: %+v", heard)
	}
	mu.Unlock()
	clk.Advance(agent.DefaultReserveTTL + time.Minute)
	var wg sync.WaitGroup
	for _, r := range []*pgspend.Guard{g, other, g, other} {
		wg.Go(func() {
			if err := r.Check(ctx, "a"); err != nil {
				t.Errorf("check: %v", err)
			}
		})
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	var day []agent.SpendAlert
	for _, a := range heard {
		if a.TenantID == "a" && a.Period == "day" {
			day = append(day, a)
		}
	}
	if len(day) != 1 || day[0].Threshold != 0.5 || day[0].SpentUSD != 6 || day[0].LimitUSD != 10 {
		t.Fatalf("the tenant's day alerts after the sweep charged $6 of $10: %+v, want one at 0.5", day)
	}
	if len(heard) != 1 {
		t.Fatalf("alerts heard: %+v, want only the tenant's day (no monthly or global limit)", heard)
	}
}
