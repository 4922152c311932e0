package sqlitememory

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/memory"
)

// TestRecallPlanStopsAtCandidates: in the recall statements FTS5 hands
// the matches over in descending rowid order (it takes the ORDER BY on
// itself: no sort of the candidates) and the items are joined to them,
// not the other way round, so the LIMIT of candidates stops the scan and
// bm25 runs for the candidates only. Only the candidates are sorted, by
// score.
func TestRecallPlanStopsAtCandidates(t *testing.T) {
	ctx := context.Background()
	db := sqlitetest.Open(t, 1)
	p, err := New(db, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	match := matchQuery("t", "dentist appointment on Thursday")
	for name, q := range map[string]struct {
		stmt string
		args []any
	}{
		"recall":       {p.q.recall, []any{"t", match, 10, 1000}},
		"recallHybrid": {p.q.recallHybrid, []any{"t", match, memory.LexicalCandidates, memory.RecentCandidates, 1000}},
	} {
		rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q.stmt, q.args...)
		if err != nil {
			t.Fatal(err)
		}
		type step struct {
			parent int
			detail string
		}
		steps := map[int]step{}
		var order []int
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			steps[id] = step{parent, detail}
			order = append(order, id)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for _, id := range order {
			plan.WriteString(steps[id].detail + "\n")
		}
		// The steps of the candidates' subquery: FTS5 first, in rowid
		// order, then the item by its primary key, and no sort.
		cand := -1
		for _, id := range order {
			if d := steps[id].detail; strings.HasSuffix(d, " cand") && !strings.HasPrefix(d, "SCAN") {
				cand = id
			}
		}
		var got []string
		for _, id := range order {
			if steps[id].parent == cand {
				got = append(got, steps[id].detail)
			}
		}
		if cand < 0 || len(got) < 2 || !strings.HasPrefix(got[0], "SCAN "+DefaultTablePrefix+"items_fts VIRTUAL TABLE") ||
			!strings.HasPrefix(got[1], "SEARCH i USING INTEGER PRIMARY KEY") || strings.Contains(strings.Join(got, "\n"), "TEMP B-TREE") {
			t.Errorf("%s: want the candidates read from FTS5 in rowid order, each item by its key, no sort; plan:\n%s", name, plan.String())
		}
	}
}
