package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// Every model call a run makes is a request step: the fact extraction the
// run schedules is a model call (it costs tokens, and logs with the run's
// RunID), so the observer hears it too.
func TestObserverHearsFactExtractionCall(t *testing.T) {
	mem := newMem(t, memory.Config{})
	model := llmtest.NewStrictScript(t, llmtest.Text("Noted.")).On(llm.PurposeRememberFacts,
		llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"}))
	var log stepLog
	o := newOrch(t, model, agent.Config{Memory: mem, MemoryOptions: agent.MemoryOptions{Extract: true}, Observer: &log})
	if _, err := o.HandleMessage(context.Background(), msg("My dentist is Dr. Kim.")); err != nil {
		t.Fatal(err)
	}
	closeOrch(t, o) // the extraction has run
	reqs := log.of(agent.StepModelRequest)
	if n := model.Calls(); len(reqs) != n {
		purposes := []llm.Purpose{}
		for _, r := range reqs {
			purposes = append(purposes, r.Request.Purpose)
		}
		t.Fatalf("the model was called %d times; the observer heard %d requests %v (no %q)", n, len(reqs), purposes, llm.PurposeRememberFacts)
	}
}
