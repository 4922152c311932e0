package pgmemory

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

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
// the columns Recall returns and the text search vector, found by the
// GIN index: every match is read, then the newest kept. Recall runs it
// only when the walk (walkSQL) did not answer. The subquery's OFFSET 0
// keeps the ORDER BY and LIMIT out of its plan, so that walking the
// newest items until enough match is not one of PostgreSQL's choices, and
// sequential scans are off for its transaction (indexPlanSQL): what is
// left is the GIN index (or, for a tenant that is a small part of the
// table, the tenant's rows by its index). Superseded items are left out
// after, so that the check runs for these alone.
const candidatesSQL = `SELECT m.* FROM (
	SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin, i.tsv
	FROM {items} i
	WHERE i.tenant_id = $1 AND i.tsv @@ (` + tsquerySQL + `)
	OFFSET 0) m
	ORDER BY m.created_at DESC, m.id DESC
	LIMIT $3`

// walkSQL is candidatesSQL's answer read by walking the tenant's newest
// {n} items, newest first, and stopping at the $3rd match: the same $3
// newest matches when it finds them (or when the tenant holds no more
// items), at a cost of at most {n} rows whatever the planner estimates.
// The filter cannot move into the subquery past its LIMIT, so the walk
// is what PostgreSQL runs.
const walkSQL = `SELECT r.* FROM (
	SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin, i.tsv
	FROM {items} i
	WHERE i.tenant_id = $1
	ORDER BY i.created_at DESC, i.id DESC
	LIMIT {n}) r
	WHERE r.tsv @@ (` + tsquerySQL + `)
	ORDER BY r.created_at DESC, r.id DESC
	LIMIT $3`

// foundSQL is -1 when the walk's candidates are the answer: it found $3,
// or the tenant holds no more than {n} items; otherwise how many it
// found. It is computed once (an InitPlan), the
// count of items only when the first test fails.
const foundSQL = `CASE WHEN (SELECT count(*) FROM cand) >= $3
	OR NOT EXISTS (SELECT 1 FROM (SELECT 1 FROM {items} WHERE tenant_id = $1 OFFSET {n} LIMIT 1) x) THEN -1
	ELSE (SELECT count(*) FROM cand) END`

// notSupersededSQL keeps the items c that no item of the tenant
// supersedes. s.supersedes <> ” (true of any match, as an id is never
// ”) lets PostgreSQL use the partial index items_supersedes_idx.
const notSupersededSQL = `NOT EXISTS (SELECT 1 FROM {items} s WHERE s.tenant_id = $1 AND s.supersedes = c.id::text AND s.supersedes <> '')`

// recallSQL ranks the candidates ({cand}) by ts_rank and returns the best
// $4 (all when NULL), each with {found} (foundSQL).
const recallSQL = `WITH cand AS ({cand})
SELECT c.id, c.text, c.kind, c.conversation_id, c.task_id, c.skill_id, c.created_at, c.tokens, c.supersedes, c.origin,
	ts_rank(c.tsv, ` + tsquerySQL + `)::float8 AS score, {found}::int8 AS found
FROM cand c
WHERE ` + notSupersededSQL + `
ORDER BY score DESC, c.created_at DESC, c.id DESC
LIMIT $4`

// recallHybridSQL reads the lexical candidates (the $4 best ranked of the
// candidates, as recallSQL ranks them) and the $5 newest items that no
// item supersedes, with their vectors (embedding_f32, or the real[] of an
// item remembered before it existed); lexical matches first, in their
// order; each with {found}, as recallSQL, computed once (f). When the
// walk did not answer, the vectors stay unread: the index step reads
// them.
const recallHybridSQL = `WITH cand AS ({cand}), f AS MATERIALIZED (SELECT {found}::int8 AS found), lex AS (
	SELECT c.id, ts_rank(c.tsv, ` + tsquerySQL + `)::float8 AS score, c.created_at
	FROM cand c
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
	lex.score, CASE WHEN (SELECT found FROM f) < 0 THEN i.embedding_f32 END,
	CASE WHEN (SELECT found FROM f) < 0 AND i.embedding_f32 IS NULL THEN i.embedding END, (SELECT found FROM f)
FROM {items} i LEFT JOIN lex ON lex.id = i.id
WHERE i.tenant_id = $1 AND i.id IN (SELECT id FROM lex UNION SELECT id FROM recent)
ORDER BY lex.score DESC NULLS LAST, i.created_at DESC, i.id DESC`

// indexPlanSQL turns off sequential scans for the rest of the
// transaction, which PostgreSQL would choose over the GIN index for a
// query it believes matches many items: it estimates a tsquery's matches
// from statistics that cannot tell a word absent from the items from a
// rare one (each unknown word counts for 0.3 % of them). Index scans stay
// on: the newest items of hybrid recall and the check for superseding
// items use them.
const indexPlanSQL = `SET LOCAL enable_seqscan = off`

// The steps of a Recall, each a way of finding the candidates: walking
// the newest items, then, when that did not answer, the GIN index.
const (
	stepWalk = iota
	stepIndex
)

// walkPerCandidate is how many of the tenant's newest items the walk
// reads per candidate, at most. A query whose words match a share s of
// the items finds its candidates within 1/s of the newest, so the walk
// answers a query matching a fifteenth of the items or more; for one
// matching fewer, the index reads every match, fewer than a fifteenth of
// the items. A row the index reads (a random heap page, then a sort)
// costs 3 to 4 times one the walk reads (EXPLAIN ANALYZE on the
// benchmark's items), so for a tenant of 100,000 items and 1,000
// candidates the two cost the same near a walk of 17,000 rows; 15 per
// candidate measured best over the benchmark's 500 queries (10 left the
// queries matching a tenth of the items, as one common word does, to
// both steps). The worst query then reads about 18,000 rows, where a plan
// chosen on PostgreSQL's estimates read all 100,000.
const walkPerCandidate = 15

// recallStatements returns stmt for each step: {cand} the step's
// candidates, {found} what foundSQL says (-1 for the index), {n} the
// parameter of the walk's length, param.
func recallStatements(stmt, param string) (steps [2]string) {
	for i, cand := range []string{walkSQL, candidatesSQL} {
		found := "(" + foundSQL + ")"
		if i == stepIndex {
			found = "-1"
		}
		steps[i] = strings.NewReplacer("{cand}", cand, "{found}", found).Replace(stmt)
		steps[i] = strings.ReplaceAll(steps[i], "{n}", param)
	}
	return steps
}

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
			return p.recall(ctx, p.db, tenantID, query, vecs[0], b)
		}
	}
	return p.recall(ctx, p.db, tenantID, query, nil, b)
}

// querier runs Recall's statements: the pool, or a transaction (the
// benchmarks measure what a Recall reads in one).
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	Begin(ctx context.Context) (pgx.Tx, error)
}

// recall runs Recall's statements on db, hybrid when qvec is not nil:
// the walk, then, when it did not answer, the index, in a transaction
// with sequential scans off (indexPlanSQL).
func (p *Provider) recall(ctx context.Context, db querier, tenantID, query string, qvec []float32, b memory.Budget) ([]memory.Item, error) {
	read := func(rows pgx.Rows) ([]memory.Item, int64, error) { return readLexical(rows, b) }
	if qvec != nil {
		read = func(rows pgx.Rows) ([]memory.Item, int64, error) { return p.readHybrid(rows, qvec, b) }
	}
	n := int64(max(p.candidates, b.MaxEntries))
	walk := n * walkPerCandidate
	if walk/walkPerCandidate != n {
		walk = math.MaxInt64
	}
	stmt, args := p.recallStatement(tenantID, query, b, qvec != nil, stepWalk, walk)
	rows, err := db.Query(ctx, stmt, args...)
	if err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	out, found, err := read(rows)
	if err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	if found < 0 {
		return out, nil
	}
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, indexPlanSQL); err != nil {
			return err
		}
		stmt, args := p.recallStatement(tenantID, query, b, qvec != nil, stepIndex, 0)
		rows, err := tx.Query(ctx, stmt, args...)
		if err != nil {
			return err
		}
		out, _, err = read(rows)
		return err
	})
	if err != nil {
		return nil, p.fail(ctx, "recall", err)
	}
	return out, nil
}

// readLexical applies b to the rows of the lexical statement, best
// first, and returns what foundSQL says in the first: -1 when the
// candidates are the answer; 0 when there is no row.
func readLexical(rows pgx.Rows, b memory.Budget) ([]memory.Item, int64, error) {
	defer rows.Close()
	var out []memory.Item
	tokens := 0
	found, first := int64(0), true
	for rows.Next() {
		if b.MaxEntries > 0 && len(out) == b.MaxEntries || b.MaxTokens > 0 && tokens == b.MaxTokens {
			break // full: every item holds at least one token
		}
		var it memory.Item
		var id int64
		var rowFound int64
		if err := rows.Scan(&id, &it.Text, &it.Kind, &it.Source.ConversationID, &it.Source.TaskID, &it.Source.SkillID,
			&it.CreatedAt, &it.Tokens, &it.Supersedes, &it.Origin, &it.Score, &rowFound); err != nil {
			return nil, 0, err
		}
		if first {
			found, first = rowFound, false
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
		return nil, 0, err
	}
	return out, found, nil
}

// recallStatement is the statement Recall runs for query at step and
// its arguments, the first being the plan mode; size is the walk's
// length.
func (p *Provider) recallStatement(tenantID, query string, b memory.Budget, withVector bool, step int, size int64) (string, []any) {
	n := max(p.candidates, b.MaxEntries)
	var args []any
	if withVector {
		args = []any{p.planned, tenantID, query, n, max(memory.LexicalCandidates, b.MaxEntries), memory.RecentCandidates}
	} else {
		var limit *int64 // the candidates, for a budget of tokens or none
		if b.MaxTokens == 0 && b.MaxEntries > 0 {
			l := int64(b.MaxEntries)
			limit = &l
		}
		args = []any{p.planned, tenantID, query, n, limit}
	}
	if step != stepIndex {
		args = append(args, size)
	}
	if withVector {
		return p.q.hybrid[step], args
	}
	return p.q.recall[step], args
}
