package agent_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// costly answers every call with usage worth $0.30 at the test's prices.
func costly() *llmtest.Script {
	return llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}}
	})
}

// $0.30 per call: 1000 × $100/M + 200 × $1000/M.
var testPrices = agent.Prices{llmtest.ModelName: {InputPerMillion: 100, OutputPerMillion: 1000}}

func spendOrch(t *testing.T, s *llmtest.Script, cfg agent.SpendLimitsConfig) (*agent.Orchestrator, *agent.SpendLimits) {
	t.Helper()
	g, err := agent.NewSpendLimits(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return newOrch(t, s, agent.Config{Prices: testPrices, SpendGuard: g}), g
}

func send(o *agent.Orchestrator, tenant string, source string) (*agent.Result, error) {
	return o.HandleMessage(context.Background(), agent.Message{TenantID: tenant, ConversationID: "c", Text: "hi", Source: source})
}

// A tenant past its daily limit is refused before any model call; other
// tenants are not; the next day it may spend again. Alerts come at 50,
// 80, 90 and 100%, once each.
func TestSpendLimitsPerTenant(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var alerts []string
	s := costly()
	o, g := spendOrch(t, s, agent.SpendLimitsConfig{
		Tenant: agent.Limits{DailyUSD: 1},
		Clock:  clk,
		Observer: func(a agent.SpendAlert) {
			mu.Lock()
			alerts = append(alerts, fmt.Sprintf("%s/%s/%.1f", a.TenantID, a.Period, a.Threshold))
			mu.Unlock()
		},
	})
	for i := range 4 { // $0.30, 0.60, 0.90, 1.20: the fourth is allowed (checked at $0.90)
		if _, err := send(o, "alice", agent.SourceUser); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
	calls := s.Calls()
	res, err := send(o, "alice", agent.SourceUser)
	if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, agent.ErrSpendLimit) || s.Calls() != calls || res.Status != agent.StatusRefused || res.Response != "Your daily spending limit of $1.00 is reached. Please try again tomorrow." {
		t.Fatalf("over the limit: err = %v, calls %d→%d", err, calls, s.Calls())
	}
	if _, err := send(o, "bob", agent.SourceUser); err != nil {
		t.Fatalf("another tenant refused: %v", err)
	}
	if day, _ := g.Spent("alice"); math.Abs(day-1.2) > 1e-9 {
		t.Fatalf("alice spent %v today", day)
	}
	mu.Lock()
	got := fmt.Sprint(alerts)
	mu.Unlock()
	if got != "[alice/day/0.5 alice/day/0.8 alice/day/0.9 alice/day/1.0]" {
		t.Fatalf("alerts = %s", got)
	}
	clk.Advance(24 * time.Hour)
	if _, err := send(o, "alice", agent.SourceUser); err != nil {
		t.Fatalf("the next day: %v", err)
	}
}

// The global limit counts every tenant; PauseNonCritical lets the users'
// own messages through and refuses triggered runs; AlertOnly refuses
// nothing.
func TestSpendLimitsGlobalAndActions(t *testing.T) {
	t.Run("pause all", func(t *testing.T) {
		o, _ := spendOrch(t, costly(), agent.SpendLimitsConfig{Global: agent.Limits{MonthlyUSD: 0.5}})
		for _, tenant := range []string{"a", "b"} {
			if _, err := send(o, tenant, agent.SourceUser); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := send(o, "c", agent.SourceUser); !errors.Is(err, agent.ErrSpendLimit) {
			t.Fatalf("a third tenant past the global limit: %v", err)
		}
	})
	t.Run("pause non-critical", func(t *testing.T) {
		o, _ := spendOrch(t, costly(), agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.1}, OnLimit: agent.PauseNonCritical})
		if _, err := send(o, "a", agent.SourceUser); err != nil {
			t.Fatal(err)
		}
		if _, err := send(o, "a", agent.SourceTrigger); !errors.Is(err, agent.ErrSpendLimit) {
			t.Fatalf("a triggered run past the limit: %v", err)
		}
		if _, err := send(o, "a", agent.SourceUser); err != nil {
			t.Fatalf("the user's own message was refused: %v", err)
		}
	})
	t.Run("alert only", func(t *testing.T) {
		var n int
		o, _ := spendOrch(t, costly(), agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.1}, OnLimit: agent.AlertOnly, Observer: func(agent.SpendAlert) { n++ }})
		for range 3 {
			if _, err := send(o, "a", agent.SourceUser); err != nil {
				t.Fatal(err)
			}
		}
		if n != 4 {
			t.Fatalf("%d alerts, want 4 (50, 80, 90, 100%%)", n)
		}
	})
}

// failingGuard fails Check: the run is refused with its error, never run
// unlimited.
type failingGuard struct{ recorded int }

var errLedgerDown = errors.New("ledger unavailable")

func (g *failingGuard) Check(ctx context.Context, tenantID string) error {
	if ri, ok := agent.RunInfoFrom(ctx); !ok || ri.TenantID != tenantID || ri.Source == "" {
		return fmt.Errorf("no run info: %+v", ri)
	}
	return errLedgerDown
}
func (g *failingGuard) Record(context.Context, string, agent.Consumed) error {
	g.recorded++
	return nil
}

func TestSpendGuardFailureRefuses(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("never"))
	g := &failingGuard{}
	o := newOrch(t, s, agent.Config{SpendGuard: g})
	_, err := o.HandleMessage(context.Background(), msg("hi"))
	if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, errLedgerDown) || s.Calls() != 0 || g.recorded != 0 {
		t.Fatalf("err = %v, calls %d, recorded %d", err, s.Calls(), g.recorded)
	}
}

func TestSpendLimitsBadConfig(t *testing.T) {
	for _, cfg := range []agent.SpendLimitsConfig{
		{Tenant: agent.Limits{DailyUSD: -1}},
		{Global: agent.Limits{MonthlyUSD: math.NaN()}},
		{PerTenant: map[string]agent.Limits{"x": {DailyUSD: -2}}},
		{Alerts: []float64{0.5, 1.5}},
		{OnLimit: agent.OnLimit(9)},
	} {
		if _, err := agent.NewSpendLimits(cfg); !errors.Is(err, agent.ErrInvalidConfig) {
			t.Fatalf("%+v: err = %v", cfg, err)
		}
	}
}
