package agent_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// reserving wraps SpendLimits, recording each reservation and refusing
// from the refuseAt-th one on (0: never).
type reserving struct {
	*agent.SpendLimits
	mu       sync.Mutex
	reserved []float64
	settled  []float64
	refuseAt int
}

var errPlanSpent = errors.New("plan spent")

func (g *reserving) Reserve(ctx context.Context, tenantID string, maxUSD float64) (agent.SettleSpend, error) {
	g.mu.Lock()
	g.reserved = append(g.reserved, maxUSD)
	n := len(g.reserved)
	g.mu.Unlock()
	if g.refuseAt > 0 && n >= g.refuseAt {
		return nil, &agent.RefusalError{Reason: "Your plan is spent for today.", Err: errPlanSpent}
	}
	settle, err := g.SpendLimits.Reserve(ctx, tenantID, maxUSD)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, cost float64) error {
		g.mu.Lock()
		g.settled = append(g.settled, cost)
		g.mu.Unlock()
		return settle(ctx, cost)
	}, nil
}

// Each model call is reserved at its largest cost before it is made, and
// settled with its real cost after: the run's Record then adds nothing
// twice. A call that sets no MaxTokens is capped at ReserveOutputTokens.
func TestSpendReserveEachCall(t *testing.T) {
	sl, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 100}})
	if err != nil {
		t.Fatal(err)
	}
	g := &reserving{SpendLimits: sl}
	var runs atomic.Int32
	s := llmtest.NewScript(
		llmtest.Reply{ToolCalls: weatherCalls("Paris").ToolCalls, Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}},
		llmtest.Reply{Text: "Sunny.", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}},
	)
	o := newOrch(t, s, agent.Config{Prices: testPrices, SpendGuard: g, Tools: []tool.Tool{countedWeather(&runs)}})
	res, err := o.HandleMessage(context.Background(), msg("weather?"))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.reserved) != 2 || len(g.settled) != 2 || g.settled[0] != 0.3 || g.settled[1] != 0.3 {
		t.Fatalf("reserved %v, settled %v", g.reserved, g.settled)
	}
	for _, r := range g.reserved { // 4096 output tokens at $1000/M, and the input
		if r < 4.096 || r > 4.2 {
			t.Fatalf("reserved %v", g.reserved)
		}
	}
	for _, req := range s.Requests() {
		if req.MaxTokens != agent.ReserveOutputTokens {
			t.Fatalf("MaxTokens = %d", req.MaxTokens)
		}
	}
	if day, _ := sl.Spent("u1"); math.Abs(day-0.6) > 1e-9 || math.Abs(res.Consumed.CostUSD-0.6) > 1e-9 {
		t.Fatalf("spent %v, consumed %v: want $0.60 counted once", day, res.Consumed.CostUSD)
	}
}

// A call whose reservation is refused is not made: the run stops as
// refused, with the guard's reason and what it consumed so far.
func TestSpendReserveRefusedMidRun(t *testing.T) {
	sl, err := agent.NewSpendLimits(agent.SpendLimitsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g := &reserving{SpendLimits: sl, refuseAt: 2}
	var runs atomic.Int32
	s := llmtest.NewScript(
		llmtest.Reply{ToolCalls: weatherCalls("Paris").ToolCalls, Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}},
		llmtest.Text("never"),
	)
	o := newOrch(t, s, agent.Config{Prices: testPrices, SpendGuard: g, Tools: []tool.Tool{countedWeather(&runs)}})
	res, err := o.HandleMessage(context.Background(), msg("weather?"))
	if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, errPlanSpent) {
		t.Fatalf("err = %v", err)
	}
	if res.Status != agent.StatusRefused || res.Response != "Your plan is spent for today." || s.Calls() != 1 || runs.Load() != 1 {
		t.Fatalf("res = %+v, calls %d, tool runs %d", res, s.Calls(), runs.Load())
	}
	if math.Abs(res.Consumed.CostUSD-0.3) > 1e-9 {
		t.Fatalf("consumed %+v", res.Consumed)
	}
	if day, _ := sl.Spent("u1"); math.Abs(day-0.3) > 1e-9 {
		t.Fatalf("spent %v", day)
	}
}

// 50 concurrent runs of one tenant against a $3 daily limit: the day's
// spend never passes the limit by more than one call's reservation.
func TestSpendReserveConcurrentRuns(t *testing.T) {
	sl, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 3}})
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply {
		return llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}} // $0.30
	})
	o := newOrch(t, s, agent.Config{Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 100, OutputPerMillion: 100}}, SpendGuard: sl})
	// $0.12 a call: 1000 × $100/M + 200 × $100/M; reserved at most ~$0.51.
	var wg sync.WaitGroup
	var refused atomic.Int32
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "alice", ConversationID: string(rune('a'+i%26)) + "x", Text: "hi"})
			if errors.Is(err, agent.ErrSpendRefused) {
				refused.Add(1)
			} else if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	day, _ := sl.Spent("alice")
	if day > 3+0.12+1e-9 || refused.Load() == 0 {
		t.Fatalf("spent $%v of $3 with %d refused", day, refused.Load())
	}
	t.Logf("50 runs: spent $%.2f of a $3 limit, %d refused", day, refused.Load())
}

// A call refused only by the reservations of calls in flight waits
// (ReserveWait) for them to settle: once one settles at its real cost,
// the call is made.
func TestSpendLimitsReserveWaitsForSettlement(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}, ReserveWait: time.Minute, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "a", Source: agent.SourceTrigger, TaskID: "t"})
	held, err := g.Reserve(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := g.Reserve(ctx, "a", 0.5)
		done <- err
	}()
	if err := clk.AwaitTimers(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if err := held(ctx, 0.2); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("after the call in flight settled at $0.20: %v", err)
	}
}
