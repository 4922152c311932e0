package rivertrigger_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// queryCounter is a pgx tracer, for the burst benchmarks only, that
// counts the statements the engines' pools send while on is set (one per
// Exec, Query or QueryRow, BEGIN and COMMIT included, and one per
// statement of a batch), by their first words, so that a round reports
// its queries per run and, with VALET_BURST_QUERIES=1, where they go.
type queryCounter struct {
	on    atomic.Bool
	total atomic.Int64
	mu    sync.Mutex
	by    map[string]int
}

func newQueryCounter() *queryCounter { return &queryCounter{by: map[string]int{}} }

// queryKey names a statement by its first 90 characters, spaces folded,
// River's sqlc name when it has one.
func queryKey(sql string) string {
	if i := strings.Index(sql, "-- name: "); i >= 0 {
		name, _, _ := strings.Cut(sql[i+len("-- name: "):], " ")
		return "river " + name
	}
	sql = strings.Join(strings.Fields(sql), " ")
	if len(sql) > 90 {
		sql = sql[:90]
	}
	return sql
}

func (c *queryCounter) count(sql string) {
	if !c.on.Load() || strings.Contains(sql, "tenant_id <> 'probe'") { // the benchmark's own polling
		return
	}
	c.total.Add(1)
	c.mu.Lock()
	c.by[queryKey(sql)]++
	c.mu.Unlock()
}

func (c *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}

func (c *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *queryCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *queryCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.count(d.SQL)
}

func (c *queryCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// report writes the statements by count, most first, to stderr (a
// benchmark's log keeps ten lines).
func (c *queryCounter) report(b *testing.B, runs int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := slices.SortedFunc(maps.Keys(c.by), func(x, y string) int { return cmp.Compare(c.by[y], c.by[x]) })
	var sb strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&sb, "\n%8.2f/run %7d  %s", float64(c.by[k])/float64(runs), c.by[k], k)
	}
	fmt.Fprintf(os.Stderr, "%s: queries by statement:%s\n", b.Name(), sb.String())
}
