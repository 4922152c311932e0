package agent_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// userTurnKey marks the ctx of the test's HandleMessage calls: a guard
// call without it is a fact extraction's (it runs in the background, on
// the orchestrator's ctx).
type userTurnKey struct{}

// extractionTally counts the fact extractions that reached the model and
// those the guard refused; the ones at the model wait until every one of
// want is either.
type extractionTally struct {
	want             int
	mu               sync.Mutex
	arrived, refused int
	all              chan struct{}
}

func newExtractionTally(want int) *extractionTally {
	return &extractionTally{want: want, all: make(chan struct{})}
}

func (x *extractionTally) add(arrived, refused int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.arrived += arrived
	x.refused += refused
	if x.arrived+x.refused == x.want {
		close(x.all)
	}
}

// wait holds an extraction at the model until all are accounted for (a
// failure detector bounds it; the test's assertions then fail).
func (x *extractionTally) wait() {
	select {
	case <-x.all:
	case <-time.After(10 * time.Second):
	}
}

func (x *extractionTally) counts() (arrived, refused int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.arrived, x.refused
}

// extractionGate is SpendLimits holding back the fact extractions' guard
// calls until open is closed, so that they all run at once, after every
// reply; it records the reservations made and counts the extractions it
// refused.
type extractionGate struct {
	*agent.SpendLimits
	open  chan struct{}
	tally *extractionTally

	mu       sync.Mutex
	reserved []float64
}

func extraction(ctx context.Context) bool { return ctx.Value(userTurnKey{}) == nil }

func (g *extractionGate) Check(ctx context.Context, tenantID string) error {
	if !extraction(ctx) {
		return g.SpendLimits.Check(ctx, tenantID)
	}
	<-g.open
	err := g.SpendLimits.Check(ctx, tenantID)
	if err != nil {
		g.tally.add(0, 1)
	}
	return err
}

func (g *extractionGate) Reserve(ctx context.Context, tenantID string, maxUSD float64) (agent.SettleSpend, error) {
	g.mu.Lock()
	g.reserved = append(g.reserved, maxUSD)
	g.mu.Unlock()
	settle, err := g.SpendLimits.Reserve(ctx, tenantID, maxUSD)
	if err != nil && extraction(ctx) {
		g.tally.add(0, 1)
	}
	return settle, err
}

// Fact extractions of several conversations of one tenant run at once
// (up to 4): each reserves its model call's largest cost before the call
// like the loop's calls, so together they cannot carry the tenant's day
// spend past its limit by more than one call's reservation. Those the
// guard refuses are skipped (an Observer step says so); the replies were
// given before and are not affected.
func TestSpendExtractionsAreReservedLikeModelCalls(t *testing.T) {
	const convs = 4
	tally := newExtractionTally(convs)
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.Purpose == llm.PurposeRememberFacts {
			tally.add(1, 0)
			tally.wait()
			// $3.10 at testPrices: most of a reservation.
			return llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call(agent.RememberToolName, `{"facts":[]}`)}, Usage: llm.Usage{InputTokens: 1000, OutputTokens: 3000}}
		}
		return llmtest.Reply{Text: "Noted.", Usage: llm.Usage{InputTokens: 10, OutputTokens: 10}} // $0.011
	})
	const limit = 1.0
	sl, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: limit}})
	if err != nil {
		t.Fatal(err)
	}
	g := &extractionGate{SpendLimits: sl, open: make(chan struct{}), tally: tally}
	var mu sync.Mutex
	var refusedSteps []agent.Step
	obs := agent.ObserverFunc(func(_ context.Context, st agent.Step) {
		if st.Kind == agent.StepSpendRefused {
			mu.Lock()
			refusedSteps = append(refusedSteps, st)
			mu.Unlock()
		}
	})
	o := newOrch(t, s, agent.Config{Prices: testPrices, SpendGuard: g, Observer: obs, MemoryOptions: agent.MemoryOptions{Extract: true}})
	ctx := context.WithValue(context.Background(), userTurnKey{}, true)
	for i := range convs {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: fmt.Sprint("c", i), Text: "I live in Paris."})
		if err != nil || res.Status != agent.StatusCompleted || res.Response != "Noted." {
			t.Fatalf("message %d: status %s, err %v", i, res.Status, err)
		}
	}
	close(g.open) // the extractions go to the guard together
	if err := o.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	day, _ := sl.Spent("u1")
	g.mu.Lock()
	maxHold := slices.Max(g.reserved)
	g.mu.Unlock()
	if day > limit+maxHold {
		t.Fatalf("the tenant spent $%.3f today: over its limit of $%.2f by more than one call's reservation ($%.3f)", day, limit, maxHold)
	}
	arrived, refused := tally.counts()
	if arrived != 1 || refused != convs-1 {
		t.Fatalf("%d extractions reached the model and %d were refused; want 1 and %d (the first one's reservation holds the rest of the limit)", arrived, refused, convs-1)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refusedSteps) != convs-1 {
		t.Fatalf("%d StepSpendRefused steps, want %d", len(refusedSteps), convs-1)
	}
	for _, st := range refusedSteps {
		if st.Request.Purpose != llm.PurposeRememberFacts || st.RunID == "" || st.Err == nil {
			t.Fatalf("refusal step %+v: want the extraction's purpose, its run id and the guard's error", st)
		}
	}
}
