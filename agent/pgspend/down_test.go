package pgspend_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// g0 is a pool on an address where no database listens: every query fails.
func g0(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), "postgres://valet@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A guard whose database is down never lets runs go unlimited: triggered
// runs are refused; users' own messages are refused too (RefuseWhenDown),
// or counted against the same limits in this process (LocalWhenDown).
func TestDatabaseDown(t *testing.T) {
	for _, mode := range []pgspend.WhenDown{pgspend.RefuseWhenDown, pgspend.LocalWhenDown} {
		g, err := pgspend.New(g0(t), pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.5}}, UsersWhenDown: mode})
		if err != nil {
			t.Fatal(err)
		}
		model := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply {
			return llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}} // $0.30
		})
		o, err := agent.NewOrchestrator(agent.Config{
			LLM: model, SpendGuard: g, Logger: slog.New(slog.DiscardHandler),
			Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 100, OutputPerMillion: 1000}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "a", Text: "report", Source: agent.SourceTrigger, TaskID: "t"})
		if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, pgspend.ErrUnavailable) || res.Status != agent.StatusRefused || res.Response != agent.DefaultRefusalReason {
			t.Fatalf("mode %d, triggered run: res = %+v, err = %v", mode, res, err)
		}
		var ran, refused int
		for range 4 {
			_, err := o.HandleMessage(ctx, agent.Message{TenantID: "a", ConversationID: "c", Text: "hi"})
			switch {
			case err == nil:
				ran++
			case errors.Is(err, agent.ErrSpendRefused):
				refused++
			default:
				t.Fatal(err)
			}
		}
		want := 0 // refused
		if mode == pgspend.LocalWhenDown {
			want = 2 // $0.30 + $0.30 reach the $0.50 limit, counted locally
		}
		if ran != want || model.Calls() != want {
			t.Fatalf("mode %d: %d user runs ran (%d calls), want %d", mode, ran, model.Calls(), want)
		}
	}
}
