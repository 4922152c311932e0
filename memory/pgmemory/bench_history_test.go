package pgmemory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/memory/pgmemory"
)

// The history table and statements before issue 25 (commit 7fe3d3f), the
// baseline of BenchmarkHistoryTurn, in a schema of their own: History
// looked for the newest summary among all the conversation's messages,
// and Append's trim read the newest MaxMessages messages every turn.
var (
	oldHistoryDDL = []string{`CREATE TABLE {history} (
	seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant_id       text COLLATE "C" NOT NULL,
	conversation_id text COLLATE "C" NOT NULL,
	role            text NOT NULL,
	message         json NOT NULL,
	summary         boolean NOT NULL DEFAULT false,
	created_at      timestamptz NOT NULL DEFAULT now()
)`, `CREATE INDEX ON {history} (tenant_id, conversation_id, seq)`}
	oldHistorySQL = `SELECT message FROM {history}
WHERE tenant_id = $1 AND conversation_id = $2 AND seq >= coalesce((
	SELECT max(seq) FROM {history}
	WHERE tenant_id = $1 AND conversation_id = $2 AND summary
), 0)
ORDER BY seq DESC LIMIT $3`
	oldInsertMsgSQL = `INSERT INTO {history} (tenant_id, conversation_id, role, message, summary) VALUES ($1, $2, $3, $4::json, $5)`
	oldTrimSQL      = `WITH kept AS (
	SELECT seq, role FROM {history} WHERE tenant_id = $1 AND conversation_id = $2 ORDER BY seq DESC LIMIT $3
), cut AS (
	SELECT coalesce(min(seq) FILTER (WHERE role <> 'tool'), max(seq) + 1) AS seq FROM kept
)
DELETE FROM {history} h USING cut
WHERE h.tenant_id = $1 AND h.conversation_id = $2 AND h.seq < cut.seq`
)

// oldTurn is one turn of the baseline: History(40), then Append of turn
// in one transaction (advisory lock, inserts, trim to maxMsgs). It
// returns how long each took.
func oldTurn(ctx context.Context, db *pgxpool.Pool, r *strings.Replacer, conv string, encoded []string, maxMsgs int) (history, appended time.Duration, err error) {
	t0 := time.Now()
	err = oldHistory(ctx, db, r, conv)
	history = time.Since(t0)
	if err != nil {
		return
	}
	t0 = time.Now()
	err = oldAppend(ctx, db, r, conv, encoded, maxMsgs)
	return history, time.Since(t0), err
}

func oldHistory(ctx context.Context, db *pgxpool.Pool, r *strings.Replacer, conv string) error {
	rows, err := db.Query(ctx, r.Replace(oldHistorySQL), benchTenant, conv, 40)
	if err != nil {
		return err
	}
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			rows.Close()
			return err
		}
	}
	rows.Close()
	return rows.Err()
}

func oldAppend(ctx context.Context, db *pgxpool.Pool, r *strings.Replacer, conv string, encoded []string, maxMsgs int) error {
	turn := benchTurn()
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, int64(len(conv)))
	for i, m := range encoded {
		b.Queue(r.Replace(oldInsertMsgSQL), benchTenant, conv, string(turn[i].Role), m, false)
	}
	b.Queue(r.Replace(oldTrimSQL), benchTenant, conv, maxMsgs)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// benchSizes are the conversation lengths BenchmarkHistoryTurn measures a
// turn at.
var benchSizes = []int{0, 40, 200, 1000}

// BenchmarkHistoryTurn measures what one turn costs the history, at
// conversations of 0 (a new one), 40, 200 (DefaultMaxMessages) and 1,000
// messages: History(limit 40), then Append of one turn with two tool
// calls (5 messages). The provider at size N keeps MaxMessages N, so
// every Append also trims the 5 oldest: the cost of a long conversation's
// every turn. 300 other conversations of 40 messages share the table.
// Each op takes one turn at every size with this tree's provider and one
// with the statements before issue 25 (the baseline, its own schema), in
// rotating order. Reported for both (the baseline's prefixed before-):
// append-p50-ms-N and history-p50-ms-N, the median Append and History at
// size N; append-x-N/0, the median Append at N over a new
// conversation's (which trims nothing); history-x-N/40, the median
// History at N over that at 40 (both return 40 messages; a new
// conversation's returns none). Flat is 1.
//
//	VALET_TEST_POSTGRES='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' \
//	  go test -run '^$' -bench BenchmarkHistoryTurn -benchtime 300x ./memory/pgmemory/
func BenchmarkHistoryTurn(b *testing.B) {
	db := testDB(b)
	schema, oldSchema := newSchema(b, db), newSchema(b, db)
	oldTable := pgx.Identifier{oldSchema, "memory_history"}.Sanitize()
	r := strings.NewReplacer("{history}", oldTable)
	for _, q := range oldHistoryDDL {
		if _, err := db.Exec(bg, r.Replace(q)); err != nil {
			b.Fatal(err)
		}
	}
	turn := benchTurn()
	var encoded []string
	for _, m := range turn {
		raw, err := pgmemory.EncodeMessage(m)
		if err != nil {
			b.Fatal(err)
		}
		encoded = append(encoded, raw)
	}
	provs := map[int]*pgmemory.Provider{}
	for _, n := range benchSizes {
		provs[n] = open(b, db, pgmemory.Config{Schema: schema, MaxMessages: max(n, len(turn))})
	}
	// The other conversations, then one of each size, both ways.
	for c := range 300 {
		conv := fmt.Sprintf("other-%d", c)
		for range 8 {
			if err := provs[40].Append(bg, benchTenant, conv, turn...); err != nil {
				b.Fatal(err)
			}
			if _, _, err := oldTurn(bg, db, r, conv, encoded, 40); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, n := range benchSizes[1:] {
		conv := fmt.Sprintf("size-%d", n)
		for range n / len(turn) {
			if err := provs[n].Append(bg, benchTenant, conv, turn...); err != nil {
				b.Fatal(err)
			}
			if _, _, err := oldTurn(bg, db, r, conv, encoded, n); err != nil {
				b.Fatal(err)
			}
		}
		if h, err := provs[n].History(bg, benchTenant, conv, 0); err != nil || len(h) != n {
			b.Fatalf("size %d: History = %d messages, %v", n, len(h), err)
		}
	}
	for _, t := range []string{pgx.Identifier{schema, "memory_history"}.Sanitize(), oldTable} {
		if _, err := db.Exec(bg, "VACUUM ANALYZE "+t); err != nil {
			b.Fatal(err)
		}
	}

	b.Run("turn", func(b *testing.B) {
		type series struct{ history, appended []time.Duration }
		after, before := map[int]*series{}, map[int]*series{}
		for _, n := range benchSizes {
			after[n], before[n] = &series{}, &series{}
		}
		for i := 0; b.Loop(); i++ {
			for k := range 2 * len(benchSizes) {
				j := (i + k) % (2 * len(benchSizes))
				n := benchSizes[j/2]
				conv := fmt.Sprintf("size-%d", n)
				if n == 0 {
					conv = fmt.Sprintf("new-%d", i)
				}
				if j%2 == 0 {
					t0 := time.Now()
					h, err := provs[n].History(bg, benchTenant, conv, 40)
					if err != nil || n > 0 && len(h) != min(n, 40) {
						b.Fatalf("History(%s) = %d messages, %v", conv, len(h), err)
					}
					t1 := time.Now()
					if err := provs[n].Append(bg, benchTenant, conv, turn...); err != nil {
						b.Fatal(err)
					}
					after[n].history = append(after[n].history, t1.Sub(t0))
					after[n].appended = append(after[n].appended, time.Since(t1))
				} else {
					h, a, err := oldTurn(bg, db, r, conv, encoded, max(n, len(turn)))
					if err != nil {
						b.Fatal(err)
					}
					before[n].history = append(before[n].history, h)
					before[n].appended = append(before[n].appended, a)
				}
			}
		}
		b.StopTimer()
		report := func(prefix string, s map[int]*series) {
			a0 := percentile(s[0].appended, 0.5)
			h40 := percentile(s[40].history, 0.5)
			for _, n := range benchSizes {
				a, h := percentile(s[n].appended, 0.5), percentile(s[n].history, 0.5)
				b.ReportMetric(a, fmt.Sprintf("%sappend-p50-ms-%d", prefix, n))
				b.ReportMetric(h, fmt.Sprintf("%shistory-p50-ms-%d", prefix, n))
				if n > 40 {
					b.ReportMetric(a/a0, fmt.Sprintf("%sappend-x-%d/0", prefix, n))
					b.ReportMetric(h/h40, fmt.Sprintf("%shistory-x-%d/40", prefix, n))
				}
			}
		}
		report("", after)
		report("before-", before)
	})
}
