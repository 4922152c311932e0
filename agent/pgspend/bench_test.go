package pgspend_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// checkOnly hides the guard's Reserve: runs are checked at their start
// and recorded at their end only, as before reservations.
type checkOnly struct{ agent.SpendGuard }

// BenchmarkReserve measures what reserving and settling costs a model
// call on the PostgreSQL guard: in each iteration one run of one model
// call on an orchestrator whose guard reserves, and one whose guard only
// checks and records, on the same database; and one Reserve and its
// settlement alone. It reports the runs in µs per call, the µs a
// reservation adds to a run of one call (its settlement replaces the
// run's Record), their ratio, and µs/reserve+settle: what each further
// call of a run pays.
func BenchmarkReserve(b *testing.B) {
	db := pgtest.DB(b)
	cfg := pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1e9}, Global: agent.Limits{DailyUSD: 1e9}}}
	cfg.Schema = pgtest.Schema(b, db)
	newOrch := func(g agent.SpendGuard) *agent.Orchestrator {
		o, err := agent.NewOrchestrator(agent.Config{
			LLM: llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply {
				return llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}}
			}),
			SpendGuard: g, Logger: slog.New(slog.DiscardHandler),
			Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 1, OutputPerMillion: 1}},
		})
		if err != nil {
			b.Fatal(err)
		}
		return o
	}
	g, err := pgspend.New(db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	with, without := newOrch(g), newOrch(checkOnly{g})
	ctx := context.Background()
	msg := agent.Message{TenantID: "bench", ConversationID: "c", Text: "hi"}
	for range 20 { // warm the pools
		with.HandleMessage(ctx, msg)
		without.HandleMessage(ctx, msg)
	}
	rctx := agent.WithRunInfo(ctx, agent.RunInfo{TenantID: "bench", Source: agent.SourceTrigger, TaskID: "t"})
	var dWith, dWithout, dDirect time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := without.HandleMessage(ctx, msg); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := with.HandleMessage(ctx, msg); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		settle, err := g.Reserve(rctx, "bench", 0.01)
		if err != nil {
			b.Fatal(err)
		}
		if err := settle(ctx, 0.005); err != nil {
			b.Fatal(err)
		}
		dDirect += time.Since(t2)
		dWith += t2.Sub(t1)
		dWithout += t1.Sub(t0)
	}
	n := float64(b.N)
	b.ReportMetric(float64(dWith.Microseconds())/n, "µs/call-reserved")
	b.ReportMetric(float64(dWithout.Microseconds())/n, "µs/call-checked")
	b.ReportMetric(float64((dWith-dWithout).Microseconds())/n, "µs-added/call")
	b.ReportMetric(float64(dWith)/float64(dWithout), "ratio")
	b.ReportMetric(float64(dDirect.Microseconds())/n, "µs/reserve+settle")
}
