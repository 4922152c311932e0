package pgmemory_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// cost is what one statement read: buffer accesses (shared hits and
// reads) of the items table, its indexes and its TOAST table and index,
// and the table's rows read. Unlike times, they do not depend on the
// machine's load.
type cost struct{ buffers, rows int64 }

// costMeter measures the cost of statements from PostgreSQL's
// per-backend counters (pg_stat_get_xact_*), read before and after them
// in one transaction, so that no flush of the counters falls in between.
type costMeter struct {
	db   *pgxpool.Pool
	rels []uint32 // the items table, its indexes, its TOAST table and index
	// table is the items table's OID.
	table uint32
}

func newCostMeter(b *testing.B, db *pgxpool.Pool, items string) *costMeter {
	b.Helper()
	m := &costMeter{db: db}
	err := db.QueryRow(bg, `SELECT $1::regclass::oid, array_agg(r) FROM (
	SELECT $1::regclass::oid AS r
	UNION SELECT indexrelid FROM pg_index WHERE indrelid = $1::regclass
	UNION SELECT reltoastrelid FROM pg_class WHERE oid = $1::regclass AND reltoastrelid <> 0
	UNION SELECT indexrelid FROM pg_index WHERE indrelid = (SELECT reltoastrelid FROM pg_class WHERE oid = $1::regclass)
) s`, items).Scan(&m.table, &m.rels)
	if err != nil {
		b.Fatalf("cost meter: %v", err)
	}
	return m
}

// costSQL is the counters of the items' relations $1: blocks fetched by
// all, and the table's ($2) rows: those fetched through an index (counted
// on the index), by a bitmap scan (on the table), or read by a
// sequential scan (the table's tuples returned).
const costSQL = `SELECT coalesce(sum(pg_stat_get_xact_blocks_fetched(r)), 0)::int8,
	(coalesce(sum(pg_stat_get_xact_tuples_fetched(r)), 0) + pg_stat_get_xact_tuples_returned($2))::int8
FROM unnest($1::oid[]) r`

// measure runs fn in a transaction and returns what it read.
func (m *costMeter) measure(ctx context.Context, fn func(tx pgx.Tx) error) (cost, error) {
	var c cost
	err := pgx.BeginFunc(ctx, m.db, func(tx pgx.Tx) error {
		var before cost
		if err := tx.QueryRow(ctx, costSQL, m.rels, m.table).Scan(&before.buffers, &before.rows); err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, costSQL, m.rels, m.table).Scan(&c.buffers, &c.rows); err != nil {
			return err
		}
		c.buffers -= before.buffers
		c.rows -= before.rows
		return nil
	})
	return c, err
}

// measureRows is measure for a statement: it runs stmt with args and
// reads its rows to the end, as Recall reads them (a TOASTed value is
// fetched when it is sent).
func (m *costMeter) measureRows(ctx context.Context, stmt string, args ...any) (cost, error) {
	return m.measure(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, stmt, args...)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	})
}

// costs summarises the costs of many statements.
type costs []cost

// quantile returns the q-quantile of the buffers and of the rows.
func (cs costs) quantile(q float64) (buffers, rows float64) {
	if len(cs) == 0 {
		return 0, 0
	}
	bs, rs := make([]int64, len(cs)), make([]int64, len(cs))
	for i, c := range cs {
		bs[i], rs[i] = c.buffers, c.rows
	}
	slices.Sort(bs)
	slices.Sort(rs)
	i := min(int(q*float64(len(cs))), len(cs)-1)
	return float64(bs[i]), float64(rs[i])
}

func (c cost) String() string { return fmt.Sprintf("%d buffers, %d rows", c.buffers, c.rows) }
