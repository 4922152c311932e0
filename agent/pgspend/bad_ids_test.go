package pgspend_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
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
