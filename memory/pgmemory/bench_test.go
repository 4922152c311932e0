package pgmemory_test

import (
	"context"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory/internal/benchdata"
)

// The benchmarks need a PostgreSQL; without VALET_TEST_POSTGRES they skip.
// Each works in a schema of its own, dropped when it ends. Run them with:
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench 'BenchmarkRecallLexical|BenchmarkRecallHybrid|BenchmarkHistoryTurn' -benchtime 200x ./memory/pgmemory/

const (
	benchItems     = 100_000
	benchBatch     = 1_000 // items per Remember while seeding
	benchTenant    = "tenant-bench"
	benchHistoryID = "conv-bench"
	benchDims      = 1536 // text-embedding-3-small's vectors
)

// denseEmbedder is llmtest.Embedder with every dimension filled, as in
// the vectors of real models: llmtest.Embedder's are mostly zeros, which
// PostgreSQL would compress to almost nothing and read back for free. It
// adds to each vector a small pseudo-random one seeded by the text.
type denseEmbedder struct{ e *llmtest.Embedder }

func (d denseEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	vecs, err := d.e.Embed(ctx, texts)
	for i, v := range vecs {
		h := fnv.New64a()
		h.Write([]byte(texts[i]))
		r := rand.New(rand.NewPCG(h.Sum64(), 7))
		for j := range v {
			v[j] += float32(r.NormFloat64() * 0.01)
		}
	}
	return vecs, err
}

// percentile returns the q-quantile (0 < q < 1) of times in
// milliseconds; it sorts times.
func percentile(times []time.Duration, q float64) float64 {
	if len(times) == 0 {
		return 0
	}
	slices.Sort(times)
	i := min(int(q*float64(len(times))), len(times)-1)
	return float64(times[i]) / float64(time.Millisecond)
}

// benchTurn is one turn with tools: the user's message, the assistant's
// two tool calls, their two results, the final answer.
func benchTurn() []llm.Message {
	c1 := llm.ToolCall{ID: "call_1", Name: "calendar_search", Arguments: []byte(`{"query":"dentist","from":"2025-03-01","to":"2025-03-31"}`)}
	c2 := llm.ToolCall{ID: "call_2", Name: "contacts_lookup", Arguments: []byte(`{"name":"Dr Ana Ruiz","fields":["phone","address"]}`)}
	return []llm.Message{
		llm.UserMessage("When is my next dentist appointment, and what's the clinic's number?"),
		llm.AssistantMessage("Let me check your calendar and contacts.", c1, c2),
		llm.ToolResultMessage(c1, `[{"title":"Dentist - Dr Ana Ruiz","start":"2025-03-14T09:30:00+00:00","end":"2025-03-14T10:15:00+00:00","location":"Rua Augusta 120, Lisbon"}]`, false),
		llm.ToolResultMessage(c2, `{"name":"Dr Ana Ruiz","phone":"+351 21 123 4567","address":"Rua Augusta 120, 1100-048 Lisbon"}`, false),
		llm.AssistantMessage("Your next dentist appointment is on Friday 14 March at 9:30 with Dr Ana Ruiz, Rua Augusta 120 in Lisbon. The clinic's number is +351 21 123 4567."),
	}
}

// benchQueries are benchdata.Queries(500): messages of 10 to 40 words
// users type, all different.
var benchQueries = benchdata.Queries(500)
