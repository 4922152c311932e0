package rivertrigger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/trigger"
)

// holdBack and letIn on their own, without River's client: a tenant
// (with a quote in its name) with 10 due runs and a window of 3 keeps 3
// available and holds 7 back for heldFor, marked; letIn lets in only as
// many as the window has room for, the first queued first, unmarked and
// due now; another tenant's run is never touched.
func TestHoldBackAndLetIn(t *testing.T) {
	pool := pgtest.PoolIn(t, pgtest.Schema(t, pgtest.DB(t)), 4)
	s, err := New(pool, Config{TenantWindow: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const busy = "o'brien ☕"
	past := time.Now().Add(-time.Minute)
	mk := func(tenant, id string) {
		t.Helper()
		task := &trigger.Task{ID: id, TenantID: tenant, Name: id, Status: trigger.StatusActive,
			Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: past}},
			Action:  trigger.Action{Instruction: "x"}, NextRun: past}
		if err := s.Create(ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		mk(busy, fmt.Sprintf("t%02d", i))
	}
	mk("other", "lone")
	// Due: River's scheduler makes them available.
	if _, err := pool.Exec(ctx, `UPDATE river_job SET state = 'available' WHERE state = 'scheduled'`); err != nil {
		t.Fatal(err)
	}
	type row struct {
		task, state string
		held        bool
		in          time.Duration // scheduled_at - now
	}
	rows := func() map[string]row {
		t.Helper()
		r, err := pool.Query(ctx, `SELECT args->>'tenant_id', args->>'task_id', state::text, metadata ? 'valet_held',
			extract(epoch FROM scheduled_at - now()) FROM river_job ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		out := map[string]row{}
		for r.Next() {
			var tenant string
			var x row
			var secs float64
			if err := r.Scan(&tenant, &x.task, &x.state, &x.held, &secs); err != nil {
				t.Fatal(err)
			}
			x.in = time.Duration(secs * float64(time.Second))
			out[tenant+"/"+x.task] = x
		}
		return out
	}
	count := func(m map[string]row, state string, held bool) int {
		n := 0
		for k, x := range m {
			if k != "other/lone" && x.state == state && x.held == held {
				n++
			}
		}
		return n
	}

	held, err := s.holdBack(ctx, busy)
	if err != nil || !held {
		t.Fatalf("holdBack: %v, %v; want runs held: %v", held, err, rows())
	}
	m := rows()
	if a, h := count(m, "available", false), count(m, "scheduled", true); a != 3 || h != 7 {
		t.Fatalf("%d available, %d held; want 3 and 7: %v", a, h, m)
	}
	for i := range 3 {
		if x := m[fmt.Sprintf("%s/t%02d", busy, i)]; x.state != "available" {
			t.Errorf("the first queued run t%02d is %s, want available", i, x.state)
		}
	}
	for k, x := range m {
		if x.held && (x.in < heldFor-time.Minute || x.in > heldFor+time.Minute) {
			t.Errorf("%s held until %s from now, want about %s", k, x.in, heldFor)
		}
	}
	if x := m["other/lone"]; x.state != "available" || x.held {
		t.Errorf("the other tenant's run is %+v, want available", x)
	}
	// A second holdBack, on the window's edge, holds nothing more.
	if held, err := s.holdBack(ctx, busy); err != nil || !held {
		t.Fatalf("holdBack again: %v, %v", held, err)
	}
	if h := count(rows(), "scheduled", true); h != 7 {
		t.Fatalf("%d held after a second holdBack, want 7", h)
	}

	// The window is full: nothing is let in.
	if err := s.letIn(ctx, busy); err != nil {
		t.Fatal(err)
	}
	if h := count(rows(), "scheduled", true); h != 7 {
		t.Fatalf("%d held after letIn with no room, want 7", h)
	}
	// Two runs end: two are let in, the first queued, due now.
	if _, err := pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now()
		WHERE args->>'tenant_id' = $1 AND args->>'task_id' IN ('t00', 't01')`, busy); err != nil {
		t.Fatal(err)
	}
	if err := s.letIn(ctx, busy); err != nil {
		t.Fatal(err)
	}
	m = rows()
	if a, h := count(m, "available", false), count(m, "scheduled", true); a != 3 || h != 5 {
		t.Fatalf("%d available, %d held after two ended; want 3 and 5: %v", a, h, m)
	}
	for _, id := range []string{"t03", "t04"} {
		if x := m[busy+"/"+id]; x.state != "available" || x.held || x.in > time.Second {
			t.Errorf("%s is %+v, want let in now", id, x)
		}
	}
	// The held runs keep their unique keys: the task's own run is not
	// queued twice.
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE args->>'tenant_id' = $1`, busy).Scan(&n); err != nil || n != 10 {
		t.Fatalf("%d jobs of the busy tenant, %v; want 10", n, err)
	}
}
