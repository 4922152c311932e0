package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// Prefix lookup prices far pricier models as their cheap base: "o3-pro"
// as o3 ($2/$8 vs the list $20/$80), "gpt-5-pro" as gpt-5, "o3-deep-research"
// as o3. A cost budget on them is enforced at a tenth of the real cost
// instead of being refused (ErrNoPrice).
func TestPricesPrefixUnderprices(t *testing.T) {
	p := agent.DefaultPrices()
	for _, m := range []string{"o3-pro", "gpt-5-pro", "o3-deep-research", "o4-mini-deep-research"} {
		if pr, ok := p.Lookup(m); ok {
			t.Errorf("DefaultPrices().Lookup(%q) = %+v, true: a different (pricier) model is priced as its prefix", m, pr)
		}
	}
}

// named is a Script whose client names another model.
type named struct {
	*llmtest.Script
	model, respModel string
}

func (n named) Model() string { return n.model }
func (n named) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := n.Script.Complete(ctx, req)
	if resp != nil && n.respModel != "" {
		resp.Model = n.respModel
	}
	return resp, err
}

func TestPricesCostBudgetOnProModelRefused(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("never"))
	o := newOrch(t, named{Script: s, model: "o3-pro"}, agent.Config{})
	m := msg("hi")
	m.Budget = agent.Budget{MaxCostUSD: 1}
	_, err := o.HandleMessage(context.Background(), m)
	if !errors.Is(err, agent.ErrNoPrice) {
		t.Errorf("cost budget on o3-pro: err = %v, calls %d; want ErrNoPrice (it is priced as o3)", err, s.Calls())
	}
}

// The meter caps every call with the client's model price, while account
// prices by the model the response names. A client (a router, a fallback)
// whose responses name a pricier model gets caps ~16x too generous.
func TestPricesMeterIgnoresResponseModel(t *testing.T) {
	r1 := weatherCalls("Paris")
	r1.Usage = llm.Usage{InputTokens: 1000, OutputTokens: 10} // $0.0026 at gpt-4o
	s := llmtest.NewScript(r1, llmtest.Reply{Text: "Sunny.", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 10}})
	o := newOrch(t, named{Script: s, model: "gpt-4o-mini", respModel: "gpt-4o"}, agent.Config{Tools: toolsWeather()})
	m := msg("Paris?")
	m.Budget = agent.Budget{MaxCostUSD: 0.01}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	// After $0.0026 at gpt-4o ($10/M output) at most ~$0.0074 remains: ≤ 740 output tokens.
	if mt := s.Requests()[1].MaxTokens; mt > 740 {
		t.Errorf("second call MaxTokens = %d; at the responding model's price ($10/M out) at most ~740 remain (consumed $%.4f)", mt, res.Consumed.CostUSD)
	}
}

func toolsWeather() []tool.Tool { return []tool.Tool{weatherTool()} }
