package rivertrigger

import (
	"context"
	"time"
)

// The tenant window (Config.TenantWindow, see Tenants share the
// workers): River works the jobs of a queue in one order, priority then
// scheduled time, so a tenant whose 5,000 runs are due at 08:00 would
// hold every worker until all of them ran, and another tenant's run due
// at 08:00:01 would wait behind them. Instead, a tenant keeps at most
// TenantWindow runs ready (running, or available to a worker) in the
// queue: when a run of a tenant starts and the tenant has more, its
// available runs past the window are held back (scheduled, marked with
// heldKey), and each run of the tenant that ends lets as many in as the
// window has room for, behind the runs already waiting. State lives in
// River's table only, so it holds across replicas and restarts. A run
// made available ahead of its time (see promote.go) is not ready until
// its time: it is neither counted nor held back before.

// heldKey marks, in a job's metadata, a run held back by the tenant
// window.
const heldKey = "valet_held"

// heldFor is how long a held run waits at most: River's scheduler makes
// it available again then, should every run that was to let it in have
// been lost with its process (each run of the tenant that ends lets in,
// the one that held it back included, so only a lost process or a
// failing database leaves a held run to it).
const heldFor = 2 * time.Minute

// holdLockClass is the first key of the advisory lock one holdBack of a
// tenant holds ("vt").
const holdLockClass = "30324" // 0x7674

// insertTopic is the topic of River's notification that jobs were
// inserted into a queue (river_insert, prefixed by the schema), which
// wakes the producers of the queue at once rather than at their next
// poll.
const insertTopic = "river_insert"

// fairIndexes are the indexes of the tenant window on River's table,
// made by Migrate: a tenant's ready runs, and its held runs. The kind
// and states are literals in the queries too, so that the planner uses
// these partial indexes under generic plans.
var fairIndexes = []string{
	`CREATE INDEX IF NOT EXISTS valet_trigger_job_ready ON {river_job} ((args->>'tenant_id'), queue, state)
		WHERE kind = 'valet_trigger_run' AND state IN ('available', 'running')`,
	`CREATE INDEX IF NOT EXISTS valet_trigger_job_held ON {river_job} ((args->>'tenant_id'), queue, priority, id)
		WHERE kind = 'valet_trigger_run' AND state = 'scheduled' AND metadata ? 'valet_held'`,
}

// holdBack holds back the available runs of tenant past the window: of
// its ready runs, the running ones and the first available ones in
// River's order stay, up to TenantWindow; the others are scheduled
// heldFor ahead and marked held. Runs locked by a fetch under way are
// passed over. It reports whether the tenant has held runs, which the
// run that called it then lets in as it ends (letIn). A tenant within
// its window with none held costs one query on the two indexes.
func (s *Store) holdBack(ctx context.Context, tenant string) (held bool, err error) {
	var over bool
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT `+windowCheck("$1", "$2", "$3")),
		tenant, s.cfg.Queue, s.cfg.TenantWindow).Scan(&over, &held); err != nil || !over {
		return held, err
	}
	return true, s.holdOver(ctx, tenant)
}

// windowCheck is the two columns of a select list that say whether the
// tenant (the parameter tenant) has more runs ready in the queue (queue)
// than window, and whether it has runs held back.
func windowCheck(tenant, queue, window string) string {
	return `(SELECT count(*) > ` + window + ` FROM (SELECT 1 FROM {river_job}
				WHERE kind = 'valet_trigger_run' AND state IN ('available', 'running')
					AND args->>'tenant_id' = ` + tenant + ` AND queue = ` + queue + `
					AND (state = 'running' OR scheduled_at <= now())
				LIMIT ` + window + ` + 1) ready),
			EXISTS (SELECT 1 FROM {river_job}
				WHERE kind = 'valet_trigger_run' AND state = 'scheduled' AND metadata ? 'valet_held'
					AND args->>'tenant_id' = ` + tenant + ` AND queue = ` + queue + `)`
}

// holdOver holds back the available runs of tenant past the window (see
// holdBack), once holdBack's check found more ready than it.
func (s *Store) holdOver(ctx context.Context, tenant string) error {
	// One replica at a time holds back a tenant's runs (the others, which
	// would find the same rows locked, pass); the lock ends with the
	// statement's transaction.
	// The runs to hold are chosen once, in a CTE (a subquery joined to
	// the UPDATE may be scanned again, and each scan skip other rows).
	_, err := s.pool.Exec(ctx, s.sql(`WITH held AS MATERIALIZED (SELECT id FROM {river_job}
			WHERE kind = 'valet_trigger_run' AND state = 'available' AND args->>'tenant_id' = $1 AND queue = $2
				AND scheduled_at <= now()
				AND (SELECT pg_try_advisory_xact_lock(`+holdLockClass+`, hashtext($1 || '/' || $2)))
			ORDER BY priority, scheduled_at, id
			OFFSET greatest(0, $3 - (SELECT count(*) FROM {river_job}
				WHERE kind = 'valet_trigger_run' AND state = 'running' AND args->>'tenant_id' = $1 AND queue = $2))
			FOR UPDATE SKIP LOCKED)
		UPDATE {river_job} j
		SET state = 'scheduled', scheduled_at = now() + make_interval(secs => $4),
			metadata = j.metadata || jsonb_build_object('`+heldKey+`', true)
		WHERE j.id IN (SELECT id FROM held) AND j.state = 'available'`),
		tenant, s.cfg.Queue, s.cfg.TenantWindow, heldFor.Seconds())
	return err
}

// letIn makes available, now, as many of tenant's held runs as its
// window has room for, the first in River's order (priority, then
// queue order), and tells the queue's producers, which fetch them at
// once; being scheduled now, they come after the runs already waiting.
// It is called when a run of the tenant ends that held runs back or
// found some held as it started, on whichever replica: the run that
// held them back is one, and each of those let in is another, so held
// runs are let in as long as runs of the tenant end.
func (s *Store) letIn(ctx context.Context, tenant string) error {
	_, err := s.pool.Exec(ctx, s.sql(`WITH held AS MATERIALIZED (SELECT id FROM {river_job}
			WHERE kind = 'valet_trigger_run' AND state = 'scheduled' AND metadata ? 'valet_held'
				AND args->>'tenant_id' = $1 AND queue = $2
			ORDER BY priority, id
			LIMIT greatest(0, $3 - (SELECT count(*) FROM {river_job}
				WHERE kind = 'valet_trigger_run' AND state IN ('available', 'running')
					AND args->>'tenant_id' = $1 AND queue = $2 AND (state = 'running' OR scheduled_at <= now())))
			FOR UPDATE SKIP LOCKED),
		woken AS (UPDATE {river_job} j SET state = 'available', scheduled_at = now(), metadata = j.metadata - '`+heldKey+`'
			WHERE j.id IN (SELECT id FROM held) AND j.state = 'scheduled'
			RETURNING 1)
		SELECT pg_notify(coalesce(nullif($4, ''), current_schema()) || '.`+insertTopic+`',
			json_build_object('queue', $2::text)::text)
		WHERE EXISTS (SELECT 1 FROM woken)`), tenant, s.cfg.Queue, s.cfg.TenantWindow, s.cfg.Schema)
	return err
}
