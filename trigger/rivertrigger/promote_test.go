package rivertrigger

import (
	"context"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/pgtest"
)

// promoteOnce on its own, without River's client: of the queue's
// scheduled runs, those due within promoteAhead (and those past their
// time) are made available in River's order, promoteBatch at a time,
// keeping their scheduled time; the runs the tenant window holds, runs
// due later, other kinds of jobs and other queues' jobs are left
// scheduled. It returns the distinct times of the moved runs not yet due.
func TestPromoteMakesRunsDueSoonAvailableInBatches(t *testing.T) {
	pool := pgtest.PoolIn(t, pgtest.Schema(t, pgtest.DB(t)), 4)
	s, err := New(pool, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	soon := pgTime(time.Now().Add(promoteAhead - 5*time.Second))
	const burst = promoteBatch + 200
	// tag names each group of jobs in its args.
	insert := func(n int, tag, kind, queue string, at time.Time, metadata string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO river_job (args, kind, queue, state, scheduled_at, priority, max_attempts, metadata)
			SELECT jsonb_build_object('tenant_id', 'tenant' || i, 'tag', $2::text), $3, $4, 'scheduled', $5, 4, 3, $6::jsonb
			FROM generate_series(1, $1) i`, n, tag, kind, queue, at, metadata); err != nil {
			t.Fatal(err)
		}
	}
	insert(burst, "burst", JobKind, DefaultQueue, soon, `{}`)
	insert(2, "late", JobKind, DefaultQueue, time.Now().Add(-time.Minute), `{}`)
	insert(3, "later", JobKind, DefaultQueue, time.Now().Add(time.Hour), `{}`)
	insert(1, "held", JobKind, DefaultQueue, soon, `{"valet_held": true}`)
	insert(2, "notice", NotifyJobKind, DefaultQueue, soon, `{}`)
	insert(2, "elsewhere", JobKind, "other_queue", soon, `{}`)

	var moved []int
	var dues [][]time.Time
	for range 4 {
		n, due, err := s.promoteOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		moved, dues = append(moved, n), append(dues, due)
	}
	if moved[0] != promoteBatch || moved[1] != burst+2-promoteBatch || moved[2] != 0 || moved[3] != 0 {
		t.Fatalf("moved %v in four passes, want %d, %d, 0, 0", moved, promoteBatch, burst+2-promoteBatch)
	}
	for i, due := range dues[:2] {
		if len(due) != 1 || !due[0].Equal(soon) {
			t.Errorf("pass %d: due times %v, want only %s (the late runs are due already)", i, due, soon)
		}
	}
	rows, err := pool.Query(ctx, `SELECT args->>'tag', state::text, count(*), bool_and(scheduled_at = $1)
		FROM river_job GROUP BY 1, 2`, soon)
	if err != nil {
		t.Fatal(err)
	}
	type group struct {
		n      int
		atSoon bool
	}
	got := map[string]group{}
	for rows.Next() {
		var tag, state string
		var g group
		if err := rows.Scan(&tag, &state, &g.n, &g.atSoon); err != nil {
			t.Fatal(err)
		}
		got[tag+" "+state] = g
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"burst available": burst, "late available": 2, "later scheduled": 3,
		"held scheduled": 1, "notice scheduled": 2, "elsewhere scheduled": 2}
	if len(got) != len(want) {
		t.Errorf("jobs by group and state: %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k].n != n {
			t.Errorf("%s: %d jobs, want %d (all: %v)", k, got[k].n, n, got)
		}
	}
	if !got["burst available"].atSoon {
		t.Error("a run made available early lost its scheduled time")
	}
}

// A tenant's runs made available ahead of their time are not ready yet:
// the tenant window neither counts them nor holds them back, and holds
// back the runs past it once they are due.
func TestTenantWindowPassesOverRunsNotYetDue(t *testing.T) {
	pool := pgtest.PoolIn(t, pgtest.Schema(t, pgtest.DB(t)), 4)
	s, err := New(pool, Config{TenantWindow: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO river_job (args, kind, queue, state, scheduled_at, priority, max_attempts)
		SELECT jsonb_build_object('tenant_id', 'busy', 'task_id', 't' || i), $1, $2, 'available', now() + interval '10 seconds', 4, 3
		FROM generate_series(1, 10) i`, JobKind, DefaultQueue); err != nil {
		t.Fatal(err)
	}
	held, err := s.holdBack(ctx, "busy")
	if err != nil || held {
		t.Fatalf("holdBack of runs not yet due: %v, %v; want none held", held, err)
	}
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'available'`).Scan(&n); err != nil || n != 10 {
		t.Fatalf("%d available, %v; want the 10 untouched", n, err)
	}
	// Due now: the window holds back 7.
	if _, err := pool.Exec(ctx, `UPDATE river_job SET scheduled_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if held, err := s.holdBack(ctx, "busy"); err != nil || !held {
		t.Fatalf("holdBack of due runs: %v, %v; want some held", held, err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'scheduled' AND metadata ? 'valet_held'`).Scan(&n); err != nil || n != 7 {
		t.Fatalf("%d held, %v; want 7", n, err)
	}
}

// addWakes keeps the due times sorted and distinct, at most maxWakes.
func TestAddWakesSortedDistinctBounded(t *testing.T) {
	base := time.Unix(1_800_000_000, 0)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	w := addWakes(nil, []time.Time{at(3), at(1), at(3)})
	w = addWakes(w, []time.Time{at(2), at(1)})
	if len(w) != 3 || !w[0].Equal(at(1)) || !w[1].Equal(at(2)) || !w[2].Equal(at(3)) {
		t.Fatalf("wakes %v, want 1, 2, 3 s", w)
	}
	many := make([]time.Time, maxWakes+10)
	for i := range many {
		many[i] = at(10 + i)
	}
	w = addWakes(w, many)
	if len(w) != maxWakes || !w[0].Equal(at(1)) {
		t.Fatalf("%d wakes from %s, want %d from the earliest", len(w), w[0], maxWakes)
	}
}
