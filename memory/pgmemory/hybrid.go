package pgmemory

import (
	"cmp"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
)

// readHybrid reads the rows of the hybrid statement — the best
// memory.LexicalCandidates lexical matches (or b.MaxEntries when larger)
// of the RecallCandidates newest, and the memory.RecentCandidates newest
// items — with their vectors; their cosine similarity to qvec is
// computed here (those below MinSimilarity stay out of the vector
// ranking) and the two rankings are fused, then the budget applied. It
// returns what foundSQL says, as readLexical does, and no items unless
// that is -1.
func (p *Provider) readHybrid(rows pgx.Rows, qvec []float32, b memory.Budget) ([]memory.Item, int64, error) {
	defer rows.Close()
	var (
		items []memory.Item
		ids   []int64
		cands []hybrid.Candidate
		found int64
	)
	for rows.Next() {
		var it memory.Item
		var id int64
		var score *float64
		var f32 []byte
		var vec []float32
		if err := rows.Scan(&id, &it.Text, &it.Kind, &it.Source.ConversationID, &it.Source.TaskID, &it.Source.SkillID,
			&it.CreatedAt, &it.Tokens, &it.Supersedes, &it.Origin, &score, &f32, &vec, &found); err != nil {
			return nil, 0, err
		}
		if f32 != nil {
			vec = decodeVector(f32)
		}
		it.ID = strconv.FormatInt(id, 10)
		c := hybrid.Candidate{Vector: vec}
		if score != nil { // lexical matches come first, best first
			c.LexicalRank = len(cands) + 1
		}
		items, ids, cands = append(items, it), append(ids, id), append(cands, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if found >= 0 {
		return nil, found, nil
	}
	ranked := hybrid.FuseAbove(qvec, cands, p.minSimilarity, func(a, b int) int {
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
	return out, -1, nil
}

// encodeVector is v as the embedding_f32 column holds it: each float32's
// bits, little-endian; nil (NULL) for nil.
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

// decodeVector is the vector encodeVector wrote as b; nil when b is not
// one (its length not a multiple of 4), so that the item is left out of
// the vector ranking as one without a vector.
func decodeVector(b []byte) []float32 {
	if len(b)%4 != 0 {
		return nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}
