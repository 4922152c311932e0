package pgmemory_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/hybrid"
	"github.com/valetkit/valet/memory/pgmemory"
)

// The statements of Recall before issue 25 (commit 7fe3d3f), run in the
// same benchmark as the baseline ("before-" metrics), on the same table:
// the OR tsquery built in a subquery, every match ranked by ts_rank_cd.
const oldQueryCTE = `WITH q AS (
	SELECT (
		SELECT string_agg('''' || replace(replace(l, '\', '\\'), '''', '''''') || '''', ' | ')
		FROM unnest(tsvector_to_array(to_tsvector('english', $2::text))) AS l
	)::tsquery AS q
)`

const oldRecallSQL = oldQueryCTE + `
SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin,
	ts_rank_cd(i.tsv, q.q)::float8 AS score
FROM {items} i, q
WHERE i.tenant_id = $1 AND q.q IS NOT NULL AND i.tsv @@ q.q
	AND NOT EXISTS (SELECT 1 FROM {items} s WHERE s.tenant_id = i.tenant_id AND s.supersedes = i.id::text AND s.supersedes <> '')
ORDER BY score DESC, i.created_at DESC, i.id DESC
LIMIT $3`

const oldRecallHybridSQL = oldQueryCTE + `, lex AS (
	SELECT i.id, ts_rank_cd(i.tsv, q.q)::float8 AS score
	FROM {items} i, q
	WHERE i.tenant_id = $1 AND q.q IS NOT NULL AND i.tsv @@ q.q
		AND NOT EXISTS (SELECT 1 FROM {items} s WHERE s.tenant_id = i.tenant_id AND s.supersedes = i.id::text AND s.supersedes <> '')
	ORDER BY score DESC, i.created_at DESC, i.id DESC
	LIMIT $3
), recent AS (
	SELECT i.id FROM {items} i
	WHERE i.tenant_id = $1
		AND NOT EXISTS (SELECT 1 FROM {items} s WHERE s.tenant_id = i.tenant_id AND s.supersedes = i.id::text AND s.supersedes <> '')
	ORDER BY i.created_at DESC, i.id DESC
	LIMIT $4
)
SELECT i.id, i.text, i.kind, i.conversation_id, i.task_id, i.skill_id, i.created_at, i.tokens, i.supersedes, i.origin,
	lex.score, i.embedding
FROM {items} i LEFT JOIN lex ON lex.id = i.id
WHERE i.tenant_id = $1 AND i.id IN (SELECT id FROM lex UNION SELECT id FROM recent)
ORDER BY lex.score DESC NULLS LAST, i.created_at DESC, i.id DESC`

// oldRecall is Recall as it was: the old statement, then the budget
// applied to its rows (with a vector, the rankings fused first).
func oldRecall(ctx context.Context, db *pgxpool.Pool, stmt, query string, qvec []float32, b memory.Budget) ([]string, error) {
	var args []any
	if qvec == nil {
		args = []any{benchTenant, query, max(1000, b.MaxEntries)}
	} else {
		args = []any{benchTenant, query, max(memory.LexicalCandidates, b.MaxEntries), memory.RecentCandidates}
	}
	rows, err := db.Query(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var items []memory.Item
	var ids []int64
	var cands []hybrid.Candidate
	for rows.Next() {
		var it memory.Item
		var id int64
		var score *float64
		dest := []any{&id, &it.Text, &it.Kind, &it.Source.ConversationID, &it.Source.TaskID, &it.Source.SkillID,
			&it.CreatedAt, &it.Tokens, &it.Supersedes, &it.Origin, &score}
		var vec []float32
		if qvec != nil {
			dest = append(dest, &vec)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		c := hybrid.Candidate{Vector: vec}
		if score != nil {
			c.LexicalRank = len(cands) + 1
		}
		items, ids, cands = append(items, it), append(ids, id), append(cands, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
	}
	if qvec != nil {
		ranked := hybrid.Fuse(qvec, cands, func(a, b int) int {
			return cmp.Or(items[b].CreatedAt.Compare(items[a].CreatedAt), cmp.Compare(ids[b], ids[a]))
		})
		order = order[:0]
		for _, r := range ranked {
			order = append(order, r.Index)
		}
	}
	var out []string
	tokens := 0
	for _, i := range order {
		if b.MaxEntries > 0 && len(out) == b.MaxEntries {
			break
		}
		if b.MaxTokens > 0 && tokens+items[i].Tokens > b.MaxTokens {
			continue
		}
		tokens += items[i].Tokens
		out = append(out, items[i].Text)
	}
	return out, nil
}

// precomputed is an Embedder answering from vectors computed before the
// benchmark, so that the figures leave out the embedding call, as a real
// one (an API round trip) would dwarf them.
type precomputed map[string][]float32

func (p precomputed) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = p[t]
	}
	return out, nil
}

// BenchmarkRecallLexical measures Recall, lexical only (no Embedder), for
// one tenant holding 100,000 items (seeded once into the schema
// valetbench_pgmemory and kept; see seedBench), with the budget an agent
// gives: Budget{MaxTokens: 500, MaxEntries: 10}. Each op recalls the next
// of 500 different queries of 10 to 40 words twice: with this tree's
// Recall and with the statement of Recall before issue 25 (the
// baseline), in alternating order. Reported: p50-ms and p99-ms of
// Recall, before-p50-ms and before-p99-ms of the baseline, x-p99 (this
// p99 / the baseline's), and top10-same: the share of the baseline's
// recalled texts that this Recall also returns for the first 100 queries
// (the two rank differently). Also reported, from PostgreSQL's counters
// (see costMeter), what one Recall reads over all 500 queries: buf-p50
// and buf-p99 (shared buffers of the items table, its indexes and TOAST),
// rows-p50 and rows-p99 (table rows), and the same for the baseline over
// the first 100 (before-buf-*, before-rows-*); and it logs the ten
// slowest queries of the timed loop with what they read.
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench BenchmarkRecallLexical -benchtime 300x ./memory/pgmemory/
func BenchmarkRecallLexical(b *testing.B) {
	benchRecall(b, false)
}

// BenchmarkRecallHybrid is BenchmarkRecallLexical with an Embedder: the
// same items, each with a vector of 1,536 dimensions (the length of
// text-embedding-3-small's), the same queries and budget. The query's
// vector is computed before the benchmark: the figures leave out the
// embedding call, which a real Embedder adds to every Recall.
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench BenchmarkRecallHybrid -benchtime 300x ./memory/pgmemory/
func BenchmarkRecallHybrid(b *testing.B) {
	benchRecall(b, true)
}

func benchRecall(b *testing.B, withVectors bool) {
	db := testDB(b)
	schema := seedBench(b, db)
	cfg := pgmemory.Config{Schema: schema, MaxItemsPerTenant: benchItems}
	old := oldRecallSQL
	var vecs precomputed
	if withVectors {
		vs, err := denseEmbedder{llmtest.NewEmbedder(benchDims)}.Embed(bg, benchQueries)
		if err != nil {
			b.Fatal(err)
		}
		vecs = precomputed{}
		for i, q := range benchQueries {
			vecs[q] = vs[i]
		}
		cfg.Embedder = vecs
		old = oldRecallHybridSQL
	}
	old = strings.ReplaceAll(old, "{items}", pgx.Identifier{schema, "memory_items"}.Sanitize())
	p, err := pgmemory.New(db, cfg)
	if err != nil {
		b.Fatal(err)
	}
	budget := memory.Budget{MaxTokens: 500, MaxEntries: 10}

	// The first 100 queries once each way, before timing: they recall,
	// and how many of the baseline's items this Recall returns too.
	same, total := 0, 0
	for i, q := range benchQueries[:100] {
		got, err := p.Recall(bg, benchTenant, q, budget)
		if err != nil || len(got) == 0 {
			b.Fatalf("Recall(%q) = %d items, %v; want some", q, len(got), err)
		}
		want, err := oldRecall(bg, db, old, q, vecs[q], budget)
		if err != nil {
			b.Fatalf("baseline: %v", err)
		}
		texts := map[string]bool{}
		for _, it := range got {
			texts[it.Text] = true
		}
		for _, w := range want {
			if texts[w] {
				same++
			}
		}
		total += len(want)
		if i < 3 {
			b.Logf("%q recalls %d items, first %q; the baseline's first %q", q, len(got), got[0].Text, want[0])
		}
	}

	// What each query reads, this Recall's statement for every query and
	// the baseline's for the first 100 (it takes seconds each on a
	// loaded machine): figures that do not depend on the load.
	meter := newCostMeter(b, db, pgx.Identifier{schema, "memory_items"}.Sanitize())
	var newCosts, oldCosts costs
	costOf := map[string]cost{}
	for i, q := range benchQueries {
		c, err := meter.measure(bg, func(tx pgx.Tx) error {
			_, err := p.RecallIn(bg, tx, benchTenant, q, vecs[q], budget)
			return err
		})
		if err != nil {
			b.Fatalf("cost of %q: %v", q, err)
		}
		newCosts, costOf[q] = append(newCosts, c), c
		if i < 100 {
			oargs := []any{benchTenant, q, max(1000, budget.MaxEntries)}
			if withVectors {
				oargs = []any{benchTenant, q, max(memory.LexicalCandidates, budget.MaxEntries), memory.RecentCandidates}
			}
			c, err := meter.measureRows(bg, old, oargs...)
			if err != nil {
				b.Fatalf("cost of the baseline for %q: %v", q, err)
			}
			oldCosts = append(oldCosts, c)
		}
	}

	b.Run("items=100k", func(b *testing.B) {
		var after, before []time.Duration
		type timed struct {
			q string
			d time.Duration
		}
		var each []timed
		for i := 0; b.Loop(); i++ {
			q := benchQueries[i%len(benchQueries)]
			for turn := range 2 {
				t0 := time.Now()
				if (i+turn)%2 == 0 {
					if _, err := p.Recall(bg, benchTenant, q, budget); err != nil {
						b.Fatal(err)
					}
					d := time.Since(t0)
					after = append(after, d)
					each = append(each, timed{q, d})
				} else {
					if _, err := oldRecall(bg, db, old, q, vecs[q], budget); err != nil {
						b.Fatal(err)
					}
					before = append(before, time.Since(t0))
				}
			}
		}
		b.StopTimer()
		slices.SortFunc(each, func(x, y timed) int { return cmp.Compare(y.d, x.d) })
		for _, t := range each[:min(10, len(each))] {
			b.Logf("slow: %v, %v: %q", t.d.Round(time.Microsecond), costOf[t.q], t.q)
		}
		p99 := percentile(after, 0.99)
		b.ReportMetric(percentile(after, 0.50), "p50-ms")
		b.ReportMetric(p99, "p99-ms")
		b.ReportMetric(percentile(before, 0.50), "before-p50-ms")
		b.ReportMetric(percentile(before, 0.99), "before-p99-ms")
		b.ReportMetric(p99/percentile(before, 0.99), "x-p99")
		b.ReportMetric(float64(same)/float64(total), "top10-same")
		for _, c := range []struct {
			name string
			cs   costs
		}{{"", newCosts}, {"before-", oldCosts}} {
			b50, r50 := c.cs.quantile(0.50)
			b99, r99 := c.cs.quantile(0.99)
			b.ReportMetric(b50, c.name+"buf-p50")
			b.ReportMetric(b99, c.name+"buf-p99")
			b.ReportMetric(r50, c.name+"rows-p50")
			b.ReportMetric(r99, c.name+"rows-p99")
		}
	})
}
