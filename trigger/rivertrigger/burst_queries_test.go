package rivertrigger_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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

// pgCPU sums the CPU time (user+sys, from /proc) of the PostgreSQL
// backends serving connections named app (application_name), which must
// run on this machine; ok is false when /proc does not show them (a
// remote server). The pid of each is returned with its time, so that a
// later reading counts a backend present at both once.
func pgCPU(b *testing.B, pool *pgxpool.Pool, app string) (byPID map[int]time.Duration, ok bool) {
	b.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, app)
	if err != nil {
		b.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	byPID = make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return nil, false
		}
		// Fields after the command's closing parenthesis: state is the
		// 3rd field of stat, utime the 14th and stime the 15th.
		_, rest, found := strings.Cut(string(data), ") ")
		f := strings.Fields(rest)
		if !found || len(f) < 13 {
			return nil, false
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, false
		}
		byPID[int(pid)] = time.Duration(ut+st) * time.Second / clockTicks
	}
	return byPID, true
}

// clockTicks is Linux's USER_HZ, the unit of /proc's CPU times.
const clockTicks = 100

// pgCPUSince is the CPU time the backends of after used since before:
// all of it for a backend started since.
func pgCPUSince(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}
