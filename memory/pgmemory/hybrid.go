package pgmemory

import (
	"cmp"
	"context"
	"strconv"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
)

// recallHybrid is Recall with the query's vector: one statement reads the
// candidates — the best memory.LexicalCandidates lexical matches (or
// b.MaxEntries when larger) of the RecallCandidates newest, and the
// memory.RecentCandidates newest items — with their vectors; their cosine
// similarity to qvec is computed here (those below MinSimilarity stay out
// of the vector ranking) and the two rankings are fused, then the budget
// applied.
func (p *Provider) recallHybrid(ctx context.Context, tenantID, query string, qvec []float32, b memory.Budget) ([]memory.Item, error) {
	rows, err := p.db.Query(ctx, p.q.recallHybrid, p.planned, tenantID, query, max(p.candidates, b.MaxEntries),
		max(memory.LexicalCandidates, b.MaxEntries), memory.RecentCandidates)
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
		var it memory.Item
		var id int64
		var score *float64
		var vec []float32
		if err := rows.Scan(&id, &it.Text, &it.Kind, &it.Source.ConversationID, &it.Source.TaskID, &it.Source.SkillID,
			&it.CreatedAt, &it.Tokens, &it.Supersedes, &it.Origin, &score, &vec); err != nil {
			return nil, p.fail(ctx, "recall", err)
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
		return nil, p.fail(ctx, "recall", err)
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
	return out, nil
}
