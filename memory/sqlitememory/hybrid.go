package sqlitememory

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
)

// itemRow is an item as a statement returns it: the columns every recall
// statement starts with.
type itemRow struct {
	it          memory.Item
	id, created int64
}

// dest returns the scan destinations of the item's columns, then more.
func (r *itemRow) dest(more ...any) []any {
	return append([]any{&r.id, &r.it.Text, &r.it.Kind, &r.it.Source.ConversationID, &r.it.Source.TaskID, &r.it.Source.SkillID,
		&r.created, &r.it.Tokens, &r.it.Supersedes, &r.it.Origin}, more...)
}

// item returns the item with its ID and CreatedAt set.
func (r *itemRow) item() memory.Item {
	it := r.it
	it.ID = strconv.FormatInt(r.id, 10)
	it.CreatedAt = time.UnixMicro(r.created)
	return it
}

// encodeVector stores a vector as a BLOB of little-endian float32s; nil
// (no vector) is NULL.
func encodeVector(v []float32) []byte {
	if v == nil {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// decodeVector reads what encodeVector stored; a BLOB whose length is not
// a multiple of 4 (written by someone else) is no vector.
func decodeVector(b []byte) []float32 {
	if len(b) == 0 || len(b)%4 != 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// recallHybrid is Recall with the query's vector: one statement reads the
// candidates — the best memory.LexicalCandidates lexical matches (or
// b.MaxEntries when larger) of the RecallCandidates newest (or
// b.MaxEntries) and the memory.RecentCandidates newest items —
// with their vectors; their cosine similarity to qvec is computed here and
// the two rankings are fused, then the budget applied. match is the FTS5
// query, "" when the query has no word (the newest items only).
func (p *Provider) recallHybrid(ctx context.Context, tenantID, match string, qvec []float32, b memory.Budget) ([]memory.Item, error) {
	stmt, args := p.q.recallHybrid, []any{tenantID, match, max(memory.LexicalCandidates, b.MaxEntries), memory.RecentCandidates, max(p.candidates, b.MaxEntries)}
	if match == "" {
		stmt, args = p.q.recallRecent, args[:4]
	}
	rows, err := p.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	defer rows.Close()
	var (
		items []memory.Item
		ids   []int64
		cands []hybrid.Candidate
	)
	for rows.Next() {
		var r itemRow
		var score sql.NullFloat64
		var blob []byte
		if err := rows.Scan(r.dest(&score, &blob)...); err != nil {
			return nil, p.fail(ctx, "recall", err)
		}
		c := hybrid.Candidate{Vector: decodeVector(blob)}
		if score.Valid { // lexical matches come first, best first
			c.LexicalRank = len(cands) + 1
		}
		items, ids, cands = append(items, r.item()), append(ids, r.id), append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	ranked := hybrid.Fuse(qvec, cands, func(a, b int) int {
		return cmp.Or(items[b].CreatedAt.Compare(items[a].CreatedAt), cmp.Compare(ids[b], ids[a]))
	})
	var out []memory.Item
	tokens := 0
	for _, r := range ranked {
		if b.MaxEntries > 0 && len(out) == b.MaxEntries {
			break
		}
		it := items[r.Index]
		if b.MaxTokens > 0 && tokens+it.Tokens > b.MaxTokens {
			continue // too large for what remains; a smaller one may fit
		}
		tokens += it.Tokens
		it.Score = r.Score
		out = append(out, it)
	}
	return out, nil
}
