package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A cost limit on a model without a price is refused when the
// orchestrator is built, not at its first run: a default cost budget, and
// a SpendLimits with dollar limits (whose runs would all cost $0).
// CheckBudget tells a caller (trigger/agentexec, when a task is created)
// the same about a Budget of its own.
func TestCostLimitOnUnpricedModelRefusedEarly(t *testing.T) {
	limits, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]agent.Config{
		"default budget": {Loop: agent.LoopConfig{Budget: agent.Budget{MaxCostUSD: 0.5}}},
		"spend limits":   {SpendGuard: limits},
	} {
		cfg.LLM = llmtest.NewScript() // names the model "llmtest", which has no price
		if _, err := agent.NewOrchestrator(cfg); !errors.Is(err, agent.ErrInvalidConfig) || !errors.Is(err, agent.ErrNoPrice) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig and ErrNoPrice", name, err)
		}
		cfg.Prices = agent.Prices{llmtest.ModelName: {InputPerMillion: 1, OutputPerMillion: 2}}
		if _, err := agent.NewOrchestrator(cfg); err != nil {
			t.Errorf("%s, priced: %v", name, err)
		}
	}
	// Limits that set no dollar amount need no price.
	free, _ := agent.NewSpendLimits(agent.SpendLimitsConfig{})
	if _, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), SpendGuard: free, Loop: agent.LoopConfig{Budget: agent.Budget{MaxTokens: 100}}}); err != nil {
		t.Fatal(err)
	}

	o := newOrch(t, llmtest.NewScript(), agent.Config{})
	if err := o.CheckBudget(agent.Budget{MaxCostUSD: 1}); !errors.Is(err, agent.ErrNoPrice) {
		t.Fatalf("CheckBudget(cost) = %v, want ErrNoPrice", err)
	}
	if err := o.CheckBudget(agent.Budget{MaxTokens: -1}); !errors.Is(err, agent.ErrInvalidBudget) {
		t.Fatalf("CheckBudget(negative) = %v, want ErrInvalidBudget", err)
	}
	if err := o.CheckBudget(agent.Budget{MaxTokens: 1000, MaxToolCalls: 3}); err != nil {
		t.Fatalf("CheckBudget(tokens) = %v", err)
	}
	priced := newOrch(t, llmtest.NewScript(), agent.Config{Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 1}}})
	if err := priced.CheckBudget(agent.Budget{MaxCostUSD: 1}); err != nil {
		t.Fatalf("CheckBudget on a priced model = %v", err)
	}
}

// A token budget too small for any model call (not even the reserve of
// output tokens a call needs) can never run: CheckBudget refuses it, so a
// task is refused when it is created, instead of every run ending with
// "used 0 of 50 tokens", status error and no answer.
func TestCheckBudgetRefusesATokenBudgetNoCallFits(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("hi"))
	o := newOrch(t, s, agent.Config{})
	b := agent.Budget{MaxTokens: 50}
	if err := o.CheckBudget(b); err == nil {
		m := msg("hello")
		m.Budget = b
		res, herr := o.HandleMessage(context.Background(), m)
		t.Fatalf("CheckBudget(%+v) = nil, yet a run with it ends %s, %q, %v after %d model calls", b, res.Status, res.Response, herr, s.Calls())
	}
}

// leastWorkableTokens finds, through CheckBudget, the smallest MaxTokens
// o accepts.
func leastWorkableTokens(t *testing.T, o *agent.Orchestrator) int {
	t.Helper()
	lo, hi := 1, 1<<20
	if o.CheckBudget(agent.Budget{MaxTokens: hi}) != nil {
		t.Fatal("CheckBudget refuses a million tokens")
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if o.CheckBudget(agent.Budget{MaxTokens: mid}) == nil {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// The least workable token budget grows with what every call sends (the
// system prompt, the tool specs) and is enforced alike by CheckBudget,
// NewOrchestrator (LoopConfig.Budget) and HandleMessage (Message.Budget:
// a clear error, no model call); the error says the least workable value.
func TestTokenBudgetNoCallFitsRefusedEverywhere(t *testing.T) {
	var runs atomic.Int32
	cfg := agent.Config{
		SystemPrompt: strings.Repeat("You are a careful travel assistant who checks the weather before answering. ", 20),
		Tools:        []tool.Tool{countedWeather(&runs)},
	}
	bare := leastWorkableTokens(t, newOrch(t, llmtest.NewScript(), agent.Config{}))
	if bare <= 64 {
		t.Fatalf("least workable MaxTokens without a prompt = %d: not even the time line is counted", bare)
	}
	s := llmtest.NewScript(llmtest.Text("hi"))
	o := newOrch(t, s, cfg)
	least := leastWorkableTokens(t, o)
	if least < bare+300 { // the prompt alone is about 380 tokens
		t.Fatalf("least workable MaxTokens = %d with a long prompt and a tool, %d without", least, bare)
	}
	err := o.CheckBudget(agent.Budget{MaxTokens: least - 1})
	if !errors.Is(err, agent.ErrInvalidConfig) || !errors.Is(err, agent.ErrInvalidBudget) || !strings.Contains(err.Error(), strconv.Itoa(least)) {
		t.Fatalf("CheckBudget(%d) = %v; want ErrInvalidConfig and ErrInvalidBudget, naming %d", least-1, err, least)
	}

	m := msg("hello")
	m.Budget = agent.Budget{MaxTokens: least - 1}
	res, err := o.HandleMessage(context.Background(), m)
	if !errors.Is(err, agent.ErrInvalidBudget) || res.Status != agent.StatusError || s.Calls() != 0 {
		t.Fatalf("HandleMessage with MaxTokens %d: err = %v, status %s, %d model calls", least-1, err, res.Status, s.Calls())
	}

	for _, n := range []int{least - 1, least} {
		c := cfg
		c.LLM, c.Logger = llmtest.NewScript(), slog.New(slog.DiscardHandler)
		c.Clock = clocktest.New(time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC))
		c.Loop.Budget = agent.Budget{MaxTokens: n}
		_, err := agent.NewOrchestrator(c)
		if n < least && (!errors.Is(err, agent.ErrInvalidConfig) || !errors.Is(err, agent.ErrInvalidBudget)) {
			t.Errorf("NewOrchestrator with LoopConfig.Budget.MaxTokens %d = %v, want ErrInvalidConfig", n, err)
		}
		if n >= least && err != nil {
			t.Errorf("NewOrchestrator with LoopConfig.Budget.MaxTokens %d = %v", n, err)
		}
	}
}
