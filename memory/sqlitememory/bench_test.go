package sqlitememory_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/internal/benchdata"
	"github.com/valetkit/valet/memory/pgmemory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

// The benchmarks run SQLite and PostgreSQL side by side, in one run, on
// the same data: SQLite on a file in a temporary directory (one
// connection, River's advice), PostgreSQL (pgmemory) in a schema of its
// own on the server VALET_TEST_POSTGRES names; without it the PostgreSQL
// side is skipped. Compare the backend=sqlite and backend=postgres lines
// of one run, never figures of different runs.
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench . -benchtime 200x ./memory/sqlitememory/
//
// VALET_BENCH_ITEMS sets how many items BenchmarkRecall seeds (default
// 100,000) and VALET_BENCH_CONVERSATIONS how many conversations
// BenchmarkFileGrowth writes (default 100,000). VALET_BENCH_BACKEND=postgres
// leaves the SQLite side out, so that a long BenchmarkFileGrowth can run
// its two sides as two processes at once (unset VALET_TEST_POSTGRES for
// the SQLite side alone).

// backend is one side of the comparison.
type backend struct {
	name string
	p    memory.Provider
	size func(b *testing.B) int64 // bytes on disk of the provider's data
}

// backends returns the providers to compare, each with cfg's limits.
func backends(b *testing.B, cfg sqlitememory.Config) []backend {
	var out []backend
	if os.Getenv("VALET_BENCH_BACKEND") != "postgres" {
		path := filepath.Join(b.TempDir(), "bench.db")
		db := sqlitetest.OpenPath(b, path, 1)
		out = append(out, backend{"sqlite", open(b, db, cfg), func(b *testing.B) int64 { return fileSize(b, db, path) }})
	}
	if os.Getenv(pgtest.EnvVar) == "" {
		b.Logf("%s not set: the PostgreSQL side is skipped", pgtest.EnvVar)
		return out
	}
	pg := pgtest.DB(b)
	schema := pgtest.Schema(b, pg)
	p, err := pgmemory.New(pg, pgmemory.Config{Schema: schema, MaxItemsPerTenant: cfg.MaxItemsPerTenant, MaxMessages: cfg.MaxMessages})
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Migrate(bg); err != nil {
		b.Fatal(err)
	}
	return append(out, backend{"postgres", p, func(b *testing.B) int64 {
		var n int64
		err := pg.QueryRow(bg, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
		if err != nil {
			b.Fatal(err)
		}
		return n
	}})
}

// fileSize is the database file's size once its write-ahead log is
// checkpointed into it.
func fileSize(b *testing.B, db *sql.DB, path string) int64 {
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		b.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// benchTurn is one turn with tools: the user's message, the assistant's
// two tool calls, their two results, the final answer (as pgmemory's
// benchmark).
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

// BenchmarkTurn measures what one turn costs the history: History(limit
// 40), then Append of one turn with two tool calls (5 messages), on a
// conversation holding 200 messages — the default MaxMessages, so every
// Append also trims the 5 oldest. Each Append is one committed
// transaction (SQLite: synchronous FULL, the driver's default in WAL).
func BenchmarkTurn(b *testing.B) {
	turn := benchTurn()
	for _, be := range backends(b, sqlitememory.Config{}) {
		for range sqlitememory.DefaultMaxMessages / len(turn) {
			if err := be.p.Append(bg, "tenant-bench", "conv-bench", turn...); err != nil {
				b.Fatalf("%s: seeding: %v", be.name, err)
			}
		}
		b.Run("backend="+be.name+"/messages=200", func(b *testing.B) {
			b.ReportAllocs()
			var times []time.Duration
			for b.Loop() {
				t0 := time.Now()
				h, err := be.p.History(bg, "tenant-bench", "conv-bench", 40)
				if err != nil || len(h) == 0 {
					b.Fatalf("History = %d messages, %v", len(h), err)
				}
				if err := be.p.Append(bg, "tenant-bench", "conv-bench", turn...); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
			}
			b.StopTimer()
			reportPercentiles(b, times)
		})
	}
}

// The items and queries are pgmemory's (memory/internal/benchdata):
// sentences such as an extractor writes, and messages of 10 to 40 words
// such as users type, 500 of them, all different.
var benchQueries = benchdata.Queries(500)

// BenchmarkRecall measures Recall, lexical, for one tenant holding
// VALET_BENCH_ITEMS (100,000) items, with the budget an agent gives:
// Budget{MaxTokens: 500, MaxEntries: 10}; each op is one Recall of the
// next of benchQueries; p50-ms and p99-ms are over the calls of the
// reported run. Both backends get the same items, 1,000 per Remember.
func BenchmarkRecall(b *testing.B) {
	benchRecall(b, 1, envInt(b, "VALET_BENCH_ITEMS", 100_000))
}

// BenchmarkRecallManyTenants is BenchmarkRecall on a file shared by 100
// tenants of 1,000 items each (the default MaxItemsPerTenant), 100,000 in
// all, recalling for one of them: the other tenants' items share its
// words, and must cost it little.
func BenchmarkRecallManyTenants(b *testing.B) {
	benchRecall(b, 100, 1000)
}

// benchRecall seeds tenants tenants of perTenant items each, the same on
// both backends, and measures Recall of benchQueries for the first.
func benchRecall(b *testing.B, tenants, perTenant int) {
	budget := memory.Budget{MaxTokens: 500, MaxEntries: 10}
	for _, be := range backends(b, sqlitememory.Config{MaxItemsPerTenant: perTenant}) {
		start := time.Now()
		r := rand.New(rand.NewPCG(11, 42))
		batch := make([]memory.Item, min(1000, perTenant))
		for tn := range tenants {
			for i := 0; i < perTenant; i += len(batch) {
				batch = batch[:min(len(batch), perTenant-i)]
				for j := range batch {
					batch[j] = memory.Item{Text: benchdata.Text(r), Kind: "fact", Source: memory.Provenance{ConversationID: fmt.Sprintf("conv-%d", (i+j)/50)}}
				}
				if _, err := be.p.Remember(bg, fmt.Sprintf("tenant-%d", tn), batch...); err != nil {
					b.Fatalf("%s: seeding: %v", be.name, err)
				}
			}
		}
		b.Logf("%s: seeded %d tenants of %d items in %v; the data takes %.1f MiB", be.name, tenants, perTenant,
			time.Since(start).Round(time.Millisecond), float64(be.size(b))/(1<<20))
		for _, q := range benchQueries {
			got, err := be.p.Recall(bg, "tenant-0", q, budget)
			if err != nil || len(got) == 0 {
				b.Fatalf("%s: Recall(%q) = %d items, %v; want some", be.name, q, len(got), err)
			}
		}
		b.Run(fmt.Sprintf("backend=%s/items=%d/tenants=%d", be.name, tenants*perTenant, tenants), func(b *testing.B) {
			b.ReportAllocs()
			var times []time.Duration
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				if _, err := be.p.Recall(bg, "tenant-0", benchQueries[i%len(benchQueries)], budget); err != nil {
					b.Fatal(err)
				}
				times = append(times, time.Since(t0))
			}
			b.StopTimer()
			reportPercentiles(b, times)
		})
	}
}

// BenchmarkFileGrowth writes (default 100,000). VALET_BENCH_BACKEND=postgres
// leaves the SQLite side out, so that a long BenchmarkFileGrowth can run
// its two sides as two processes at once (unset VALET_TEST_POSTGRES for
// the SQLite side alone).

// BenchmarkFileGrowth writes VALET_BENCH_CONVERSATIONS (100,000)
// conversations of one turn each (the 5 messages of benchTurn, 1.3 KB of
// JSON), each conversation also remembering one item, as a day of an
// assistant with many users would, and reports the bytes on disk per
// conversation (bytes/conv) and in all (MiB): for SQLite the file after a
// checkpoint of its write-ahead log, for PostgreSQL the tables with their
// indexes and TOAST. The op is one conversation; -benchtime 1x.
func BenchmarkFileGrowth(b *testing.B) {
	n := envInt(b, "VALET_BENCH_CONVERSATIONS", 100_000)
	turn := benchTurn()
	r := rand.New(rand.NewPCG(3, 4))
	for _, be := range backends(b, sqlitememory.Config{}) {
		b.Run(fmt.Sprintf("backend=%s/conversations=%d", be.name, n), func(b *testing.B) {
			for b.Loop() {
				before := be.size(b)
				start := time.Now()
				for i := range n {
					tenant, conv := fmt.Sprintf("tenant-%d", i%1000), fmt.Sprintf("conv-%d", i)
					if err := be.p.Append(bg, tenant, conv, turn...); err != nil {
						b.Fatal(err)
					}
					if _, err := be.p.Remember(bg, tenant, memory.Item{Text: benchdata.Text(r), Source: memory.Provenance{ConversationID: conv}}); err != nil {
						b.Fatal(err)
					}
				}
				took := time.Since(start)
				grown := be.size(b) - before
				b.ReportMetric(float64(grown)/float64(n), "bytes/conv")
				b.ReportMetric(float64(grown)/(1<<20), "MiB")
				b.ReportMetric(float64(took.Microseconds())/float64(n), "µs/conv")
			}
		})
	}
}

// reportPercentiles reports the p50 and p99 of times in milliseconds.
func reportPercentiles(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	at := func(q float64) float64 {
		i := min(int(q*float64(len(times))), len(times)-1)
		return float64(times[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
}
