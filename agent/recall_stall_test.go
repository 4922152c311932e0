package agent_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// stalledEmbedder is an embeddings endpoint that accepts the connection
// and never answers (it honours ctx, as llm.Embedder requires).
type stalledEmbedder struct{ stalled atomic.Bool }

func (e *stalledEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if !e.stalled.Load() {
		return llmtest.NewEmbedder(0).Embed(ctx, texts)
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// Recall runs on the run's ctx with no deadline of its own: every model
// call of the run is bounded by LLMTimeout, but the embedding of the query
// (a model call to the embeddings endpoint; llm/openai's http.Client has
// no timeout) is not. A stalled embeddings endpoint holds every message of
// every tenant that has items — and its conversation's lock — until the
// caller's ctx ends (forever with context.Background), although "a
// failing recall is logged and the message is answered without it".
func TestStalledEmbedderBlocksEveryMessage(t *testing.T) {
	emb := &stalledEmbedder{}
	mem := newMem(t, memory.Config{Embedder: emb})
	if _, err := mem.Remember(context.Background(), "u1", memory.Item{Text: "The user's dentist is Dr. Kim."}); err != nil {
		t.Fatal(err)
	}
	emb.stalled.Store(true)
	s := llmtest.NewScript(llmtest.Text("Hello."))
	o := newOrch(t, s, agent.Config{Memory: mem, MemoryOptions: agent.MemoryOptions{RecallTimeout: 200 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	res, err := o.HandleMessage(ctx, msg("Who is my dentist?"))
	if err != nil || time.Since(start) > 2*time.Second {
		t.Fatalf("after %v: status %s, err %v, model calls %d; want the answer without recall within about RecallTimeout", time.Since(start).Round(time.Millisecond), res.Status, err, s.Calls())
	}
}
