package agent_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A model call reserved at the primary model's price is answered by a
// dearer fallback: the reservation held what the cheap model may cost,
// so concurrent runs of one tenant overshoot the day's limit by many
// times one call's reservation. The limit must still hold to one call.
func TestSpendReservationHoldsWhenAFallbackModelIsDearer(t *testing.T) {
	const runs, limit = 8, 1.0
	overloaded := &llm.Error{Kind: llm.KindUnavailable, StatusCode: 529, Message: "overloaded"}
	primary := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Reply{Err: overloaded} })
	var mu sync.Mutex
	arrived := 0
	all := make(chan struct{})
	backup := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		mu.Lock()
		arrived++
		if arrived == runs {
			close(all)
		}
		mu.Unlock()
		select { // every run's call reserved before any settles
		case <-all:
		case <-time.After(10 * time.Second):
		}
		return llmtest.Reply{Text: "done", Usage: llm.Usage{InputTokens: 100, OutputTokens: req.MaxTokens}}
	})
	chain, err := llm.NewFallback(llm.FallbackConfig{Primary: modelNamed{primary, "cheap"}, Fallbacks: []llm.Client{modelNamed{backup, "dear"}},
		Names: []string{"cheap", "dear"}, RetryDelay: 1})
	if err != nil {
		t.Fatal(err)
	}
	guard, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: limit}})
	if err != nil {
		t.Fatal(err)
	}
	prices := agent.Prices{
		"cheap": {InputPerMillion: 1, OutputPerMillion: 1},
		"dear":  {InputPerMillion: 100, OutputPerMillion: 100},
	}
	o, err := agent.NewOrchestrator(agent.Config{LLM: chain, Prices: prices, SpendGuard: guard,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			_, _ = o.HandleMessage(context.Background(), agent.Message{TenantID: "a", ConversationID: fmt.Sprint("c", i), Text: "report"})
		})
	}
	wg.Wait()
	day, _ := guard.Spent("a")
	reservation := prices["dear"].Cost(llm.Usage{InputTokens: 100, OutputTokens: agent.ReserveOutputTokens})
	t.Logf("spent $%.4f, %d primary calls, %d backup calls", day, primary.Calls(), backup.Calls())
	if day > limit+reservation+1e-9 {
		t.Fatalf("the day spent $%.2f against a $%.2f limit: overshot by $%.2f, more than one call's largest cost ($%.2f)", day, limit, day-limit, reservation)
	}
}

// modelNamed is a scripted client that names its model.
type modelNamed struct {
	*llmtest.Script
	model string
}

func (n modelNamed) Model() string { return n.model }

func (n modelNamed) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := n.Script.Complete(ctx, req)
	if resp != nil {
		resp.Model = n.model
	}
	return resp, err
}

func (n modelNamed) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		for c, err := range n.Script.Stream(ctx, req) {
			if c.Response != nil {
				c.Response.Model = n.model
			}
			if !yield(c, err) {
				return
			}
		}
	}
}
