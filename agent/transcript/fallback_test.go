package transcript_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// A switch of an llm.Fallback is a model_fallback record naming both
// models and the failure's kind.
func TestTranscriptRecordsFallbacks(t *testing.T) {
	down := &llm.Error{Kind: llm.KindUnavailable, Message: "overloaded"}
	primary := llmtest.NewScript(llmtest.Fail(down), llmtest.Fail(down))
	backup := llmtest.NewScript(llmtest.Text("From the backup."))
	fb, err := llm.NewFallback(llm.FallbackConfig{Primary: primary, Fallbacks: []llm.Client{backup}, Names: []string{"big", "small"}, RetryDelay: 1})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tx, err := transcript.New(transcript.Config{Writer: &out})
	if err != nil {
		t.Fatal(err)
	}
	o, err := agent.NewOrchestrator(agent.Config{LLM: fb, Observer: tx, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: "c1", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := transcript.Read(&out)
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, r := range recs {
		if r.Kind == agent.StepModelFallback {
			found = r.FallbackFrom == "big" && r.FallbackTo == "small" && r.ErrorKind == llm.KindUnavailable.String()
		}
	}
	if !found {
		t.Fatalf("no model_fallback record from big to small (unavailable) among %+v", recs)
	}
}
