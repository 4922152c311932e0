package rivertrigger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/trigger"
)

// Runs implements [trigger.Store.Runs].
func (s *Store) Runs(ctx context.Context, tenantID, taskID string, limit int) ([]trigger.Run, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit %d", trigger.ErrInvalid, limit)
	}
	if err := checkIDs("tenant ID", tenantID, "task ID", taskID); err != nil {
		return nil, err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, s.sql(`SELECT EXISTS (SELECT 1 FROM {tasks} WHERE tenant_id = $1 AND id = $2)`),
		tenantID, taskID).Scan(&exists); err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	if !exists {
		return nil, fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, tenantID, taskID)
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT run FROM {runs} WHERE tenant_id = $1 AND task_id = $2
		ORDER BY seq DESC LIMIT $3`), tenantID, taskID, lim)
	if err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	datas, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	out := make([]trigger.Run, len(datas))
	for i, d := range datas {
		if err := json.Unmarshal(d, &out[i]); err != nil {
			return nil, fmt.Errorf("rivertrigger: stored run: %w", err)
		}
	}
	return out, nil
}

// Due implements [trigger.Store.Due]. The engine does not poll it on this
// store (River delivers the runs); it is there for inspection.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]*trigger.Task, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d is not positive", trigger.ErrInvalid, limit)
	}
	rows, err := s.pool.Query(ctx, s.sql(`SELECT task FROM {tasks}
		WHERE status = 'ACTIVE' AND next_run IS NOT NULL AND next_run <= $1
		ORDER BY next_run, priority DESC, tenant_id, id LIMIT $2`), now, limit)
	if err != nil {
		return nil, s.fail(ctx, "due", err)
	}
	return s.collectTasks(ctx, "due", rows)
}
