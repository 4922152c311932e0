package pgspend_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/llm/llmtest"
)

// A tenant ID PostgreSQL text cannot hold, or that no valet package takes,
// is ErrInvalid before anything is sent: never a raw PostgreSQL error
// (which a host would serve as a 500).
func TestInvalidTenantIDs(t *testing.T) {
	g := opener(t, pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}}})()
	ctx := context.Background()
	for _, id := range []string{"", "a\x00b", "\xff\xfe", strings.Repeat("x", agent.MaxIDLen+1)} {
		_, rerr := g.Reserve(ctx, id, 0.1)
		_, _, serr := g.Spent(ctx, id+"\x00")
		for i, err := range []error{g.Check(ctx, id), g.Record(ctx, id, agent.Consumed{CostUSD: 0.1}), rerr, serr} {
			if !errors.Is(err, pgspend.ErrInvalid) || strings.Contains(err.Error(), "SQLSTATE") {
				t.Fatalf("tenant %q, call %d: err = %v, want ErrInvalid", id, i, err)
			}
		}
	}
	if _, err := pgspend.New(nil, pgspend.Config{}); !errors.Is(err, pgspend.ErrInvalid) {
		t.Fatalf("nil pool: %v", err)
	}
	for _, cfg := range []pgspend.Config{
		{Schema: "a\x00b"},
		{Schema: strings.Repeat("s", 64)},
		{UsersWhenDown: 7},
		{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: -1}}},
	} {
		if _, err := pgspend.New(g0(t), cfg); !errors.Is(err, pgspend.ErrInvalid) {
			t.Fatalf("%+v: err = %v", cfg, err)
		}
	}
}

// A guard with dollar limits on a model without a price would count every
// call at $0 and never refuse: the orchestrator refuses it when built.
func TestDollarLimitsNeedAPrice(t *testing.T) {
	g, err := pgspend.New(g0(t), pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Global: agent.Limits{MonthlyUSD: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), SpendGuard: g})
	if !errors.Is(err, agent.ErrInvalidConfig) || !errors.Is(err, agent.ErrNoPrice) {
		t.Fatalf("err = %v, want ErrInvalidConfig and ErrNoPrice", err)
	}
	if _, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), SpendGuard: g, Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 1}}}); err != nil {
		t.Fatal(err)
	}
}
