package pgspend_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
)

// A restart forgets nothing: a guard on a fresh pool (the process that
// replaced the one that spent) refuses the tenant at its limit.
func TestRestartKeepsTheDay(t *testing.T) {
	open := opener(t, pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}}})
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "a", Source: agent.SourceTrigger, TaskID: "t"})
	before := open()
	settle, err := before.Reserve(ctx, "a", 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := settle(ctx, 1.5); err != nil {
		t.Fatal(err)
	}
	after := open() // another pool: a new process
	if err := after.Check(ctx, "a"); !errors.Is(err, agent.ErrSpendLimit) {
		t.Fatalf("after a restart: %v", err)
	}
	if day, month, err := after.Spent(context.Background(), "a"); err != nil || day != 1.5 || month != 1.5 {
		t.Fatalf("after a restart: spent %v / %v, %v", day, month, err)
	}
}
