package rivertrigger

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/valetkit/valet/trigger"
)

// What a run reads as it starts (see The morning burst): River's worker
// of a scheduled run reads, in the statement that checks the tenant
// window, the run's task and its recent runs, which the engine's
// HandleDue reads first thing (Get, then Runs to find an earlier attempt
// of the run). The first Get and the first Runs of that task made with
// the run's context are answered from it, once each; any later call
// reads the database. Nothing is written between the read and its use
// but by a writer that Finish's revision check catches.

// prefetchRuns is how many of the task's newest runs are read ahead: the
// engine looks for an earlier attempt among 20.
const prefetchRuns = 20

type prefetchKey struct{}

// prefetch is what a run's worker read ahead of HandleDue.
type prefetch struct {
	tenant, task string
	taskData     []byte // nil: no such task
	runs         []byte // JSON array of the newest prefetchRuns runs, newest first; nil: none
	gotTask      atomic.Bool
	gotRuns      atomic.Bool
}

// prefetched returns the read-ahead of tenant's task in ctx, or nil.
func prefetched(ctx context.Context, tenant, task string) *prefetch {
	p, _ := ctx.Value(prefetchKey{}).(*prefetch)
	if p == nil || p.tenant != tenant || p.task != task {
		return nil
	}
	return p
}

// getPrefetched answers the first Get of p's task.
func (p *prefetch) getPrefetched() (*trigger.Task, bool, error) {
	if p == nil || !p.gotTask.CompareAndSwap(false, true) {
		return nil, false, nil
	}
	if p.taskData == nil {
		return nil, true, fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, p.tenant, p.task)
	}
	t, err := decodeTask(p.taskData)
	return t, true, err
}

// runsPrefetched answers the first Runs of p's task for at most
// prefetchRuns runs.
func (p *prefetch) runsPrefetched(limit int) ([]trigger.Run, bool, error) {
	if p == nil || limit <= 0 || limit > prefetchRuns || !p.gotRuns.CompareAndSwap(false, true) {
		return nil, false, nil
	}
	if p.taskData == nil {
		return nil, true, fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, p.tenant, p.task)
	}
	var runs []trigger.Run
	if p.runs != nil {
		if err := json.Unmarshal(p.runs, &runs); err != nil {
			return nil, true, fmt.Errorf("rivertrigger: stored run: %w", err)
		}
	}
	return runs[:min(limit, len(runs))], true, nil
}

// startRun reads, in one statement, the task of a scheduled run's job
// and its newest runs (see prefetch) and, with the tenant window on,
// whether the tenant has more runs ready than the window (over) and runs
// held back (held), as holdBack's first query does.
func (s *Store) startRun(ctx context.Context, tenant, task string) (p *prefetch, over, held bool, err error) {
	p = &prefetch{tenant: tenant, task: task}
	q := `SELECT (SELECT task FROM {tasks} WHERE tenant_id = $1 AND id = $2),
			(SELECT json_agg(run ORDER BY seq DESC) FROM (SELECT run, seq FROM {runs}
				WHERE tenant_id = $1 AND task_id = $2 ORDER BY seq DESC LIMIT $3) r)`
	args := []any{tenant, task, prefetchRuns}
	dest := []any{&p.taskData, &p.runs}
	if s.cfg.TenantWindow > 0 {
		q += `, ` + windowCheck("$1", "$4", "$5")
		args = append(args, s.cfg.Queue, s.cfg.TenantWindow)
		dest = append(dest, &over, &held)
	}
	if err := s.pool.QueryRow(ctx, s.sql(q), args...).Scan(dest...); err != nil {
		return nil, false, false, err
	}
	return p, over, held, nil
}
