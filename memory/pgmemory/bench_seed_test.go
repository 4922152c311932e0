package pgmemory_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/benchdata"
	"github.com/valetkit/valet/memory/pgmemory"
)

// benchSchema holds the recall benchmarks' 100,000 items. Unlike the
// tests' schemas it is kept after the run, so that the next run reuses
// it (seeding takes a minute); a comment on the schema says the seed is
// complete and of which version. Drop it with
//
//	DROP SCHEMA valetbench_pgmemory CASCADE
//
// VALET_BENCH_PGMEMORY_SCHEMA names another schema instead, so that two
// trees benchmarked on one database at once do not migrate each other's
// (see benchSchemaName).
const (
	benchSchema   = "valetbench_pgmemory"
	benchSeedMark = "valet pgmemory recall benchmark seed v2: 100000 items with 1536-dim vectors in embedding (real[]) and embedding_f32"
)

// seedBench returns the benchmark schema, migrated by the provider of
// this tree and holding benchItems items of benchTenant with dense
// vectors, seeding it (by COPY) when it is missing, incomplete or of an
// earlier seed. Each vector is stored twice: as real[] in embedding, which
// the baseline (Recall before issue 25) reads, and as float32s in
// embedding_f32, which Recall writes and reads now.
func seedBench(b *testing.B, db *pgxpool.Pool) string {
	b.Helper()
	benchSchema := benchSchemaName()
	schemaID := pgx.Identifier{benchSchema}.Sanitize()
	if _, err := db.Exec(bg, `CREATE SCHEMA IF NOT EXISTS `+schemaID); err != nil {
		b.Fatalf("creating %s: %v", benchSchema, err)
	}
	p, err := pgmemory.New(db, pgmemory.Config{Schema: benchSchema, MaxItemsPerTenant: benchItems})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Migrate(bg); err != nil {
		b.Fatalf("Migrate: %v", err)
	}
	var mark *string
	if err := db.QueryRow(bg, `SELECT obj_description($1::regnamespace, 'pg_namespace')`, benchSchema).Scan(&mark); err != nil {
		b.Fatal(err)
	}
	items := pgx.Identifier{benchSchema, "memory_items"}.Sanitize()
	if mark != nil && *mark == benchSeedMark {
		return benchSchema
	}
	start := time.Now()
	tx, err := db.Begin(bg)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := tx.Exec(bg, `TRUNCATE `+items); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(11, 42))
	emb := denseEmbedder{llmtest.NewEmbedder(benchDims)}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	const batch = 2_000
	for n := 0; n < benchItems; n += batch {
		texts := make([]string, batch)
		for i := range texts {
			texts[i] = benchdata.Text(r)
		}
		vecs, err := emb.Embed(bg, texts)
		if err != nil {
			b.Fatal(err)
		}
		rows := make([][]any, batch)
		for i, text := range texts {
			rows[i] = []any{benchTenant, text, "fact", fmt.Sprintf("conv-%d", (n+i)/50),
				base.Add(time.Duration(n+i) * time.Minute), memory.EstimateTokens(text), vecs[i], pgmemory.EncodeVector(vecs[i])}
		}
		if _, err := tx.CopyFrom(bg, pgx.Identifier{benchSchema, "memory_items"},
			[]string{"tenant_id", "text", "kind", "conversation_id", "created_at", "tokens", "embedding", "embedding_f32"},
			pgx.CopyFromRows(rows)); err != nil {
			b.Fatalf("seeding: %v", err)
		}
	}
	if _, err := tx.Exec(bg, `COMMENT ON SCHEMA `+schemaID+` IS '`+benchSeedMark+`'`); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(bg); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(bg, "VACUUM ANALYZE "+items); err != nil {
		b.Fatalf("VACUUM ANALYZE: %v", err)
	}
	b.Logf("seeded %d items in %s in %v", benchItems, benchSchema, time.Since(start).Round(time.Millisecond))
	return benchSchema
}

// BenchmarkSeed only seeds the recall benchmarks' schema (see
// benchSchema), for looking at plans with psql.
func BenchmarkSeed(b *testing.B) {
	seedBench(b, testDB(b))
	for b.Loop() {
	}
}

// benchSchemaName is the schema of the recall benchmarks' items:
// VALET_BENCH_PGMEMORY_SCHEMA, or benchSchema when it is unset.
func benchSchemaName() string {
	return cmp.Or(os.Getenv("VALET_BENCH_PGMEMORY_SCHEMA"), benchSchema)
}
