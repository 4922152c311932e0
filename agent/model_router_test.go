package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A message asks for a model by name; the router says which client that
// is, and Result.Models names it. A message naming none uses Config's.
func TestMessageModelIsRoutedByName(t *testing.T) {
	smart := renamed{llmtest.NewScript(llmtest.Text("smart answer"), llmtest.Text("smart again")), "big-model"}
	fast := renamed{llmtest.NewScript(llmtest.Text("fast answer")), "small-model"}
	o := newOrch(t, smart, agent.Config{Models: agent.ModelMap{"smart": smart, "fast": fast}})

	m := msg("quick one")
	m.Model = "fast"
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || res.Response != "fast answer" || len(res.Models) != 1 || res.Models[0] != "small-model" {
		t.Fatalf("res %+v err %v; want the fast model's answer", res, err)
	}
	res, err = o.HandleMessage(context.Background(), msg("hard one"))
	if err != nil || res.Response != "smart answer" {
		t.Fatalf("res %+v err %v; want the default model's answer", res, err)
	}
}

// A name no client answers fails the run before any model call.
func TestMessageModelUnknownNameIsRefused(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("never"))
	o := newOrch(t, s, agent.Config{Models: agent.ModelMap{"smart": s}})
	m := msg("hi")
	m.Model = "fsat"
	if _, err := o.HandleMessage(context.Background(), m); !errors.Is(err, agent.ErrUnknownModel) {
		t.Fatalf("err = %v, want ErrUnknownModel", err)
	}
	o2 := newOrch(t, s, agent.Config{}) // no router at all
	if _, err := o2.HandleMessage(context.Background(), m); !errors.Is(err, agent.ErrUnknownModel) {
		t.Fatalf("without Models: err = %v, want ErrUnknownModel", err)
	}
	if s.Calls() != 0 {
		t.Fatalf("%d model calls, want none", s.Calls())
	}
	if err := o.CheckModel("smart"); err != nil {
		t.Fatalf("CheckModel(smart) = %v", err)
	}
}

// Names the orchestrator can see when it is built are checked then.
func TestConfigModelNamesAreCheckedAtBuild(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("from smart"))
	quiet := slog.New(slog.DiscardHandler)
	cases := map[string]agent.Config{
		"a default name the router does not answer": {Models: agent.ModelMap{"smart": s}, Model: "fast", Logger: quiet},
		"a default name with no router":             {LLM: s, Model: "fast", Logger: quiet},
		"a name mapped to no client":                {LLM: s, Models: agent.ModelMap{"smart": s, "fast": nil}, Logger: quiet},
	}
	for name, cfg := range cases {
		if _, err := agent.NewOrchestrator(cfg); !errors.Is(err, agent.ErrUnknownModel) {
			t.Errorf("%s: err = %v, want ErrUnknownModel", name, err)
		}
	}
	// Config.Model names the client when LLM is nil.
	o, err := agent.NewOrchestrator(agent.Config{Models: agent.ModelMap{"smart": s}, Model: "smart", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(context.Background())
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if err != nil || res.Response != "from smart" {
		t.Fatalf("res %+v err %v", res, err)
	}
}

// A routed run is priced at the model it ran on, even when the client
// does not name the model in its responses.
func TestRoutedRunIsPricedAtItsModel(t *testing.T) {
	def := llmtest.NewScript(llmtest.Text("default"))
	cheap := unnamedResponses{renamed{llmtest.NewScript(llmtest.Text("cheap answer")), "cheap-model"}}
	o := newOrch(t, def, agent.Config{
		Models: agent.ModelMap{"cheap": cheap},
		Prices: agent.Prices{
			llmtest.ModelName: {InputPerMillion: 1000, OutputPerMillion: 1000},
			"cheap-model":     {InputPerMillion: 1, OutputPerMillion: 1},
		},
	})
	m := msg("hi")
	m.Model = "cheap"
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if want := float64(res.Consumed.Tokens) / 1e6; res.Consumed.CostUSD > want*1.0001 || res.Consumed.CostUSD < want*0.9999 {
		t.Fatalf("cost %g, want %g (cheap-model's price); models %v", res.Consumed.CostUSD, want, res.Models)
	}
}

// unnamedResponses is a client whose responses name no model.
type unnamedResponses struct{ renamed }

func (u unnamedResponses) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := u.renamed.Complete(ctx, req)
	if resp != nil {
		resp.Model = ""
	}
	return resp, err
}
