package pgmemory

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/msgjson"
)

// EncodeMessage is how a message is stored, for the baseline of the benchmarks.
var EncodeMessage = msgjson.Encode

// EncodeVector is how a vector is stored (embedding_f32), for seeding the
// benchmarks.
var EncodeVector = encodeVector

// RecallIn is Recall run in tx, with the query's vector qvec (nil for
// lexical recall), for the benchmarks' figures of what one Recall reads.
func (p *Provider) RecallIn(ctx context.Context, tx pgx.Tx, tenantID, query string, qvec []float32, b memory.Budget) ([]memory.Item, error) {
	return p.recall(ctx, tx, tenantID, memory.RecallQuery(query), qvec, b)
}
