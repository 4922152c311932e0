package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// The background fact extraction of a run logs with the run's tenant,
// conversation and RunID.
func TestExtractionLogCarriesRunID(t *testing.T) {
	h := newRecordLog()
	s := llmtest.NewScript(llmtest.Text("Noted.")).
		On(llm.PurposeRememberFacts, llmtest.Fail(errors.New("extraction down")))
	o := newOrch(t, s, agent.Config{Logger: slog.New(h), Memory: newMem(t, memory.Config{}),
		MemoryOptions: agent.MemoryOptions{Extract: true}})
	res, err := o.HandleMessage(context.Background(), msg("My dentist is Dr. Kim."))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Close(context.Background()); err != nil { // waits for the extraction
		t.Fatal(err)
	}
	recs := h.records()
	found := false
	for _, m := range recs {
		if m["msg"] == "agent: fact extraction failed" {
			found = true
			if m["run_id"] != res.RunID || m["tenant"] != "u1" || m["conversation"] != "c1" {
				t.Errorf("extraction log line %v: want run_id %q, tenant u1, conversation c1", m, res.RunID)
			}
		}
	}
	if !found {
		t.Fatalf("no extraction failure logged: %v", recs)
	}
}
