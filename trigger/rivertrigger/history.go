package rivertrigger

import (
	"context"
	"fmt"
	"time"

	"github.com/valetkit/valet/trigger"
)

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
