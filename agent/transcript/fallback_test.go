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

// A sub-agent's steps carry its path in the transcript.
func TestTranscriptRecordsSubAgentPaths(t *testing.T) {
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.Messages[0].Content == agent.DefaultWorkerPrompt {
			return llmtest.Text("Found three hotels.")
		}
		if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
			return llmtest.Text("Done.")
		}
		return llmtest.Calls(llm.ToolCall{ID: "sp1", Name: agent.SpawnAgentTool, Arguments: []byte(`{"task":"find hotels"}`)})
	})
	var out bytes.Buffer
	tx, err := transcript.New(transcript.Config{Writer: &out})
	if err != nil {
		t.Fatal(err)
	}
	o, err := agent.NewOrchestrator(agent.Config{LLM: s, Observer: tx, SubAgents: agent.SubAgentOptions{Enabled: true}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: "c1", Text: "hotels?"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := transcript.Read(&out)
	if err != nil {
		t.Fatal(err)
	}
	child := 0
	for _, r := range recs {
		if len(r.Path) == 1 && r.Path[0] == "sp1" {
			child++
		}
	}
	if child == 0 {
		t.Fatalf("no record carries the sub-agent's path: %+v", recs)
	}
}
