package pgspend_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/pgspend"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// lookup is a tool the scripted model calls once per run.
func lookup() tool.Tool {
	type in struct {
		Q string `json:"q"`
	}
	return tool.New("lookup", "Looks something up", func(_ context.Context, x in) (string, error) { return "found " + x.Q, nil })
}

// toolThenAnswer calls lookup, then answers once the tool answered; each
// call reports 1,000 input and 200 output tokens ($0.12 at $100/M).
func toolThenAnswer() *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		u := llm.Usage{InputTokens: 1000, OutputTokens: 200}
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == llm.RoleTool {
			return llmtest.Reply{Text: "done", Usage: u}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{llmtest.Call("lookup", `{"q":"x"}`)}, Usage: u}
	})
}

// reservations records the largest reservation a guard was asked for.
type reservations struct {
	*pgspend.Guard
	mu  sync.Mutex
	max float64
}

func (r *reservations) Reserve(ctx context.Context, tenantID string, maxUSD float64) (agent.SettleSpend, error) {
	r.mu.Lock()
	r.max = max(r.max, maxUSD)
	r.mu.Unlock()
	return r.Guard.Reserve(ctx, tenantID, maxUSD)
}

// Two replicas (orchestrators with guards on pools of their own, one
// schema) run 50 runs of one tenant at once, two model calls each: the
// day's recorded spend never passes the limit by more than one call's
// reservation, and runs past it are refused. (Under such contention runs
// are refused while the holds of calls in flight fill the limit, so the
// day may end below it: reservations trade that for never overshooting.)
// With ReserveWait, a call refused only by the holds of calls in flight
// waits for them instead: the day ends nearer the limit, never past it by
// more than one reservation either.
//
// With fact extraction on, each answered run's extraction (one model call
// in the background, up to 4 at once per replica) is reserved like the
// runs' calls: the bound holds with them counted.
func TestTwoReplicasNeverOvershoot(t *testing.T) {
	t.Run("refuse at once", func(t *testing.T) { twoReplicas(t, 0, false) })
	t.Run("wait for calls in flight", func(t *testing.T) { twoReplicas(t, time.Minute, false) })
	t.Run("with fact extraction", func(t *testing.T) { twoReplicas(t, 0, true) })
}

func twoReplicas(t *testing.T, wait time.Duration, extract bool) {
	const limit = 3.0
	open := opener(t, pgspend.Config{SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: limit}, ReserveWait: wait}})
	var guards []*reservations
	var orchs []*agent.Orchestrator
	var model []*llmtest.Script
	for range 2 {
		g := &reservations{Guard: open()}
		s := toolThenAnswer()
		o, err := agent.NewOrchestrator(agent.Config{
			LLM: s, SpendGuard: g, Logger: slog.New(slog.DiscardHandler), Tools: []tool.Tool{lookup()},
			Prices:        agent.Prices{llmtest.ModelName: {InputPerMillion: 100, OutputPerMillion: 100}},
			MemoryOptions: agent.MemoryOptions{Extract: extract, ExtractTriggered: extract},
		})
		if err != nil {
			t.Fatal(err)
		}
		guards, orchs, model = append(guards, g), append(orchs, o), append(model, s)
	}
	var wg sync.WaitGroup
	var done, refused, midRun atomic.Int32
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := orchs[i%2].HandleMessage(context.Background(), agent.Message{TenantID: "acme", ConversationID: fmt.Sprint("c", i), Text: "go", Source: agent.SourceTrigger, TaskID: "t"})
			switch {
			case err == nil:
				done.Add(1)
			case errors.Is(err, agent.ErrSpendRefused) && errors.Is(err, agent.ErrSpendLimit):
				refused.Add(1)
				if res.Consumed.CostUSD > 0 {
					midRun.Add(1)
				}
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, o := range orchs { // the extractions end
		if err := o.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	day, _, err := guards[0].Spent(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	maxRes := max(guards[0].max, guards[1].max)
	calls := model[0].Calls() + model[1].Calls()
	if day > limit+maxRes+1e-9 || refused.Load() == 0 {
		t.Fatalf("spent $%.4f of $%.2f (one reservation: $%.4f), %d runs done, %d refused", day, limit, maxRes, done.Load(), refused.Load())
	}
	if extract {
		n := 0
		for _, m := range model {
			for _, r := range m.Requests() {
				if r.Purpose == llm.PurposeRememberFacts {
					n++
				}
			}
		}
		if n == 0 {
			t.Fatal("no fact extraction reached the model")
		}
	}
	if want := float64(calls) * 0.12; day < want-1e-6 || day > want+1e-6 {
		t.Fatalf("spent $%.4f for %d calls of $0.12", day, calls)
	}
	t.Logf("ReserveWait %v, extraction %v: 2 replicas, 50 runs: spent $%.4f of a $%.2f limit: overshoot $%.4f (one call's reservation is $%.4f, a call costs $0.12); %d runs done, %d refused (%d mid-run), %d model calls",
		wait, extract, day, limit, max(day-limit, 0), maxRes, done.Load(), refused.Load(), midRun.Load(), calls)
}
