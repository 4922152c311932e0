package pgmemory

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
)

// tsquerySQL is the query $2 as a tsquery: its lexemes, read by
// to_tsvector('english', ...) as the items' text is, joined by OR; NULL
// when it has none, so that it matches nothing. It calls immutable
// functions of $2 alone, so that PostgreSQL computes it once, when it
// plans the statement for the call's query, and estimates from it how
// many items match. (strip's text form quotes each lexeme, doubling
// quotes and backslashes, and separates them by one space; a lexeme never
// holds a space, so every "' '" is between two lexemes.)
const tsquerySQL = `CASE WHEN length(to_tsvector('english', $2::text)) = 0 THEN NULL
	ELSE replace(strip(to_tsvector('english', $2::text))::text, ''' ''', ''' | ''')::tsquery END`

// candidatesSQL is the tenant's $3 newest items matching the query, with
// the columns Recall returns and the text search vector. Superseded items
// are left out after, so that the check runs for these alone.
const candidatesSQL = `SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin, i.tsv
	FROM {items} i
	WHERE i.tenant_id = $1 AND i.tsv @@ (` + tsquerySQL + `)
	ORDER BY i.created_at DESC, i.id DESC
	LIMIT $3`

// notSupersededSQL keeps the items c that no item of the tenant
// supersedes. s.supersedes <> ” (true of any match, as an id is never
// ”) lets PostgreSQL use the partial index items_supersedes_idx.
const notSupersededSQL = `NOT EXISTS (SELECT 1 FROM {items} s WHERE s.tenant_id = $1 AND s.supersedes = c.id::text AND s.supersedes <> '')`

// recallSQL ranks the candidates by ts_rank and returns the best $4 (all
// when NULL).
const recallSQL = `SELECT c.id, c.text, c.kind, c.conversation_id, c.task_id, c.skill_id, c.created_at, c.tokens, c.supersedes, c.origin,
	ts_rank(c.tsv, ` + tsquerySQL + `)::float8 AS score
FROM (` + candidatesSQL + `) c
WHERE ` + notSupersededSQL + `
ORDER BY score DESC, c.created_at DESC, c.id DESC
LIMIT $4`

// recallHybridSQL reads the lexical candidates (the $4 best ranked of the
// candidates, as recallSQL ranks them) and the $5 newest items that no
// item supersedes, with their vectors; lexical matches first, in their
// order.
const recallHybridSQL = `WITH lex AS (
	SELECT c.id, ts_rank(c.tsv, ` + tsquerySQL + `)::float8 AS score, c.created_at
	FROM (` + candidatesSQL + `) c
	WHERE ` + notSupersededSQL + `
	ORDER BY score DESC, c.created_at DESC, c.id DESC
	LIMIT $4
), recent AS (
	SELECT c.id FROM {items} c
	WHERE c.tenant_id = $1 AND ` + notSupersededSQL + `
	ORDER BY c.created_at DESC, c.id DESC
	LIMIT $5
)
SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin,
	lex.score, i.embedding
FROM {items} i LEFT JOIN lex ON lex.id = i.id
WHERE i.tenant_id = $1 AND i.id IN (SELECT id FROM lex UNION SELECT id FROM recent)
ORDER BY lex.score DESC NULLS LAST, i.created_at DESC, i.id DESC`

// planMode returns the pgx.QueryExecMode Recall's statements run in: one
// in which PostgreSQL plans every execution for its own query. Which plan
// is fast depends on how many items the query's words match: the newest
// items, walked in order until enough match, for a common word; the
// full-text index, then a sort, for a rare one. A named prepared statement
// (pgx's default mode, QueryExecModeCacheStatement) may be given one
// generic plan for all queries after five executions; the unnamed
// statement of QueryExecModeCacheDescribe is planned at each, in the same
// single round trip. The other modes plan at each execution already.
func planMode(db *pgxpool.Pool) pgx.QueryExecMode {
	cc := db.Config().ConnConfig
	switch {
	case cc.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement:
		return cc.DefaultQueryExecMode
	case cc.DescriptionCacheCapacity > 0:
		return pgx.QueryExecModeCacheDescribe
	default:
		return pgx.QueryExecModeDescribeExec
	}
}

// Recall returns the items most relevant to query within b; see
// memory.Provider.Recall. Relevance is PostgreSQL full-text search: the
// query is read with to_tsvector('english', ...) like the items, its
// lexemes are joined into an OR tsquery, and the RecallCandidates newest
// matches rank by ts_rank.
// With an Embedder, that ranking is merged with the vector similarity of
// the candidates to the query by reciprocal rank fusion (see the package
// documentation). Only the first memory.MaxQueryBytes of query are read
// (memory.RecallQuery).
func (p *Provider) Recall(ctx context.Context, tenantID, query string, b memory.Budget) ([]memory.Item, error) {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return nil, fmt.Errorf("pgmemory: recall: %w", err)
	}
	if b.MaxTokens < 0 || b.MaxEntries < 0 {
		return nil, fmt.Errorf("pgmemory: recall: %w: budget %+v is negative", memory.ErrInvalid, b)
	}
	if err := ctx.Err(); err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	// NUL and invalid UTF-8 replaced (a text parameter holds neither),
	// cut to MaxQueryBytes (a tsvector holds at most 1 MB of words).
	query = memory.RecallQuery(query)
	if p.embedder != nil && hybrid.HasWord(query) {
		vecs := hybrid.Embed(ctx, p.embedder, []string{query})
		if err := ctx.Err(); err != nil {
			return nil, p.fail(ctx, "recall", err)
		}
		if vecs != nil {
			return p.recallHybrid(ctx, tenantID, query, vecs[0], b)
		}
	}
	var limit *int64 // the candidates, for a budget of tokens or none
	if b.MaxTokens == 0 && b.MaxEntries > 0 {
		l := int64(b.MaxEntries)
		limit = &l
	}
	rows, err := p.db.Query(ctx, p.q.recall, p.planned, tenantID, query, max(p.candidates, b.MaxEntries), limit)
	if err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	defer rows.Close()
	var out []memory.Item
	tokens := 0
	for rows.Next() {
		if b.MaxEntries > 0 && len(out) == b.MaxEntries || b.MaxTokens > 0 && tokens == b.MaxTokens {
			break // full: every item holds at least one token
		}
		var it memory.Item
		var id int64
		if err := rows.Scan(&id, &it.Text, &it.Kind, &it.Source.ConversationID, &it.Source.TaskID, &it.Source.SkillID,
			&it.CreatedAt, &it.Tokens, &it.Supersedes, &it.Origin, &it.Score); err != nil {
			return nil, p.fail(ctx, "recall", err)
		}
		if b.MaxTokens > 0 && tokens+it.Tokens > b.MaxTokens {
			continue // too large for what remains; a smaller one may fit
		}
		tokens += it.Tokens
		it.ID = strconv.FormatInt(id, 10)
		out = append(out, it)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	return out, nil
}
