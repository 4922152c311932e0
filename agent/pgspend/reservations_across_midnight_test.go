package pgspend_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/internal/pgtest"
)

// Calls reserved just before midnight are settled just after it: their
// cost lands in the new day, though the new day's reservations never
// counted them while they were in flight. With two replicas holding calls
// across midnight, the new day must still end at most one call's
// reservation above its limit.
func TestReservationsInFlightAtMidnightNeverOvershootTheNewDay(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 25, 23, 59, 0, 0, time.UTC))
	const limit, call = 1.0, 0.25
	open := opener(t, pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: limit}, Clock: clk}})
	a, b := open(), open() // two replicas
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "a", Source: agent.SourceTrigger, TaskID: "t"})
	var settles []agent.SettleSpend
	reserve := func(g *pgspend.Guard) bool {
		s, err := g.Reserve(ctx, "a", call)
		if err != nil {
			return false
		}
		settles = append(settles, s)
		return true
	}
	// 23:59: the old day's calls in flight, as many as its limit allows.
	for i := 0; i < 8; i++ {
		if !reserve([]*pgspend.Guard{a, b}[i%2]) {
			break
		}
	}
	clk.Advance(2 * time.Minute) // 00:01 of the new day, calls still in flight
	for i := 0; i < 8; i++ {
		if !reserve([]*pgspend.Guard{a, b}[i%2]) {
			break
		}
	}
	var wg sync.WaitGroup
	for _, s := range settles {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s(context.Background(), call); err != nil { // each call cost what it reserved
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	day, _, err := a.Spent(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if day > limit+call+1e-9 {
		t.Fatalf("the new day spent $%.2f against a $%.2f limit: overshot by $%.2f, more than one call's reservation ($%.2f)", day, limit, day-limit, call)
	}
}

// A settlement that fails on a database blip leaves the call's cost to
// Record (SettleSpend's contract), which fails in the same blip. Once
// the database is back and the hold's TTL has run out, the call's cost
// must still be counted somewhere: else each blip lets a tenant spend
// past its limit by what was in flight.
func TestCostOfACallSettledDuringABlipIsNotLost(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	g, err := pgspend.New(db, pgspend.Config{Schema: schema, SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}, Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "a", Source: agent.SourceTrigger, TaskID: "t"})
	settle, err := g.Reserve(ctx, "a", 0.9)
	if err != nil {
		t.Fatal(err)
	}
	// The blip: the spend table is unreachable while the call settles.
	if _, err := db.Exec(ctx, `ALTER TABLE `+schema+`.valet_spend RENAME TO valet_spend_away`); err != nil {
		t.Fatal(err)
	}
	settleErr := settle(ctx, 0.9)
	recordErr := g.Record(ctx, "a", agent.Consumed{CostUSD: 0.9, Tokens: 1})
	if _, err := db.Exec(ctx, `ALTER TABLE `+schema+`.valet_spend_away RENAME TO valet_spend`); err != nil {
		t.Fatal(err)
	}
	if settleErr == nil || recordErr == nil {
		t.Skipf("the blip did not fail both: settle %v, record %v", settleErr, recordErr)
	}
	clk.Advance(agent.DefaultReserveTTL + time.Minute) // the hold expires
	if err := g.Check(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	day, _, err := g.Spent(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if day < 0.9 {
		t.Fatalf("after a blip at settlement, the day counts $%.2f of a $0.90 call: the cost is lost and the tenant may spend it again", day)
	}
}
