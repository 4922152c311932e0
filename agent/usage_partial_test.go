package agent_test

import (
	"context"
	"math"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// outputOnly reports output tokens only (as some streaming APIs do).
type outputOnly struct{ *llmtest.Script }

func (n outputOnly) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := n.Script.Complete(ctx, req)
	if resp != nil {
		resp.Usage = llm.Usage{OutputTokens: 5}
	}
	return resp, err
}

// account falls back to the estimate only when Usage is entirely zero: a
// partial report (output only) is taken as is, so every input token — the
// bulk of an agent's spend — goes uncounted and unpriced.
func TestUsagePartialNotEstimated(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("ok"))
	o := newOrch(t, outputOnly{s}, agent.Config{SystemPrompt: "You are a helpful assistant with a long persona. "})
	res, err := o.HandleMessage(context.Background(), msg("Please summarise everything we discussed about the quarterly plan in detail."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Consumed.Tokens <= 5 {
		t.Errorf("Consumed.Tokens = %d: the request's input tokens are not counted when the model reports output only", res.Consumed.Tokens)
	}
}

// afford converts the remaining cost to tokens with int(float): a large
// but finite MaxCostUSD (valid per Budget.Check) overflows to a negative
// int on amd64 and the run fails at once with ErrBudgetExceeded.
func TestBudgetHugeCostOverflows(t *testing.T) {
	s := llmtest.NewScript(llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}})
	o := newOrch(t, s, agent.Config{Prices: testPrices})
	m := msg("hi")
	m.Budget = agent.Budget{MaxCostUSD: 1e20}
	if math.IsInf(m.Budget.MaxCostUSD, 0) {
		t.Fatal("test setup")
	}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || res.Response != "ok" {
		t.Errorf("MaxCostUSD 1e20: res %+v, err = %v", res, err)
	}
}
