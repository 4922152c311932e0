package rivertrigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/valetkit/valet/trigger"
)

// AddRun implements [trigger.Store.AddRun], keeping the newest MaxRuns
// runs of the task.
func (s *Store) AddRun(ctx context.Context, r trigger.Run) error {
	if err := r.Check(); err != nil {
		return err
	}
	normRun(&r)
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("rivertrigger: add run: %w", err)
	}
	// One statement, so one round trip and its own transaction: the
	// insert, and the trim of the task's runs past MaxRuns when it
	// inserted. The trim sees the runs as they were before the insert, so
	// it keeps the newest MaxRuns - 1 of them beside the new one.
	var added int
	err = s.pool.QueryRow(ctx, s.sql(`WITH ins AS (
			INSERT INTO {runs} (tenant_id, task_id, id, run) VALUES ($1, $2, $3, $4)
			ON CONFLICT DO NOTHING RETURNING 1),
		trimmed AS (DELETE FROM {runs} WHERE tenant_id = $1 AND task_id = $2 AND EXISTS (SELECT 1 FROM ins)
			AND seq <= (SELECT seq FROM {runs} WHERE tenant_id = $1 AND task_id = $2
				ORDER BY seq DESC OFFSET $5 LIMIT 1))
		SELECT count(*) FROM ins`), r.TenantID, r.TaskID, r.ID, string(data), s.cfg.MaxRuns-1).Scan(&added)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" { // foreign_key_violation
		return fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, r.TenantID, r.TaskID)
	}
	if err == nil && added == 0 {
		return fmt.Errorf("%w: tenant %q, task %q: run %q exists", trigger.ErrConflict, r.TenantID, r.TaskID, r.ID)
	}
	return s.fail(ctx, "add run", err)
}

// UpdateRun implements [trigger.Store.UpdateRun]. A run recorded waiting
// for approvals that expire has its expiry queued in the same transaction
// (see Approvals of triggered runs).
func (s *Store) UpdateRun(ctx context.Context, r trigger.Run) error {
	if err := r.Check(); err != nil {
		return err
	}
	return s.fail(ctx, "update run", s.inTx(ctx, func(tx pgx.Tx) error { return s.updateRun(ctx, tx, r) }))
}

// SwapRun implements [trigger.RunSwapper]: it replaces the run old.ID with
// r only while the stored run is old, in one statement, so that of two
// replicas settling one run's approval at once one writes it and the
// other gets trigger.ErrConflict (and reads it again). When it ends a
// waiting run (its approvals settled or expired), the run's notice and
// the run a chained route queues are queued in the same transaction
// (see Notices).
func (s *Store) SwapRun(ctx context.Context, old, r trigger.Run) error {
	if err := r.Check(); err != nil {
		return err
	}
	if old.ID != r.ID || old.TenantID != r.TenantID || old.TaskID != r.TaskID {
		return fmt.Errorf("%w: rivertrigger: swapping run %q for run %q", trigger.ErrInvalid, old.ID, r.ID)
	}
	return s.fail(ctx, "swap run", s.inTx(ctx, func(tx pgx.Tx) error {
		if err := s.writeRun(ctx, tx, r, &old); err != nil {
			return err
		}
		return s.settledInTx(ctx, tx, old, r)
	}))
}

// SettleRun implements [trigger.RunSettler]: the swap of SwapRun (with
// the notice and chained run it queues) and the update of t (with the
// run it queues when t is ACTIVE again) in one transaction, the task's
// row locked first, so that a process that dies after the settlement
// never leaves its task PENDING_APPROVAL, and of two replicas settling at
// once the one that loses writes nothing.
func (s *Store) SettleRun(ctx context.Context, old, r trigger.Run, t *trigger.Task) error {
	if err := r.Check(); err != nil {
		return err
	}
	if old.ID != r.ID || old.TenantID != r.TenantID || old.TaskID != r.TaskID {
		return fmt.Errorf("%w: rivertrigger: swapping run %q for run %q", trigger.ErrInvalid, old.ID, r.ID)
	}
	if t == nil || r.TenantID != t.TenantID || r.TaskID != t.ID {
		return fmt.Errorf("%w: rivertrigger: run %q is not of the task given", trigger.ErrInvalid, r.ID)
	}
	return s.update(ctx, "settle run", t, func(tx pgx.Tx) error {
		if err := s.writeRun(ctx, tx, r, &old); err != nil {
			return err
		}
		return s.settledInTx(ctx, tx, old, r)
	})
}

func (s *Store) updateRun(ctx context.Context, tx pgx.Tx, r trigger.Run) error {
	return s.writeRun(ctx, tx, r, nil)
}

// writeRun writes r in tx, when old is set only over a stored run equal
// to it, and queues the expiry of r's approvals when it waits.
func (s *Store) writeRun(ctx context.Context, tx pgx.Tx, r trigger.Run, old *trigger.Run) error {
	normRun(&r)
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	q, args := `UPDATE {runs} SET run = $4 WHERE tenant_id = $1 AND task_id = $2 AND id = $3`,
		[]any{r.TenantID, r.TaskID, r.ID, string(data)}
	if old != nil {
		o := *old
		normRun(&o)
		od, err := json.Marshal(o)
		if err != nil {
			return err
		}
		q, args = q+` AND run::jsonb = $5::jsonb`, append(args, string(od))
	}
	tag, err := tx.Exec(ctx, s.sql(q), args...)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if old != nil {
			if err := tx.QueryRow(ctx, s.sql(`SELECT EXISTS (SELECT 1 FROM {runs}
				WHERE tenant_id = $1 AND task_id = $2 AND id = $3)`), r.TenantID, r.TaskID, r.ID).Scan(&exists); err != nil {
				return err
			}
		}
		if exists {
			return fmt.Errorf("%w: tenant %q, task %q: run %q changed meanwhile", trigger.ErrConflict, r.TenantID, r.TaskID, r.ID)
		}
		return fmt.Errorf("%w: tenant %q, task %q: run %q", trigger.ErrNotFound, r.TenantID, r.TaskID, r.ID)
	}
	return s.queueExpiry(ctx, tx, r)
}

// Runs implements [trigger.Store.Runs].
func (s *Store) Runs(ctx context.Context, tenantID, taskID string, limit int) ([]trigger.Run, error) {
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit %d", trigger.ErrInvalid, limit)
	}
	if err := checkIDs("tenant ID", tenantID, "task ID", taskID); err != nil {
		return nil, err
	}
	if runs, ok, err := prefetched(ctx, tenantID, taskID).runsPrefetched(limit); ok {
		return runs, err
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	// One statement: a row per run, newest first, or one NULL when the
	// task has none; no row when there is no task.
	rows, err := s.pool.Query(ctx, s.sql(`SELECT r.run FROM {tasks} t
		LEFT JOIN LATERAL (SELECT run, seq FROM {runs} WHERE tenant_id = $1 AND task_id = $2
			ORDER BY seq DESC LIMIT $3) r ON true
		WHERE t.tenant_id = $1 AND t.id = $2
		ORDER BY r.seq DESC`), tenantID, taskID, lim)
	if err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	datas, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	if len(datas) == 0 {
		return nil, fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, tenantID, taskID)
	}
	if len(datas) == 1 && datas[0] == nil {
		datas = nil
	}
	out := make([]trigger.Run, len(datas))
	for i, d := range datas {
		if err := json.Unmarshal(d, &out[i]); err != nil {
			return nil, fmt.Errorf("rivertrigger: stored run: %w", err)
		}
	}
	return out, nil
}
