package sqlitetrigger

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

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
		return fmt.Errorf("sqlitetrigger: add run: %w", err)
	}
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM valet_trigger_tasks WHERE tenant_id = ? AND id = ?`,
			r.TenantID, r.TaskID).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, r.TenantID, r.TaskID)
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO valet_trigger_runs (tenant_id, task_id, id, run)
			VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, r.TenantID, r.TaskID, r.ID, string(data))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: tenant %q, task %q: run %q exists", trigger.ErrConflict, r.TenantID, r.TaskID, r.ID)
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM valet_trigger_runs WHERE tenant_id = ?1 AND task_id = ?2 AND seq <= (
			SELECT seq FROM valet_trigger_runs WHERE tenant_id = ?1 AND task_id = ?2
			ORDER BY seq DESC LIMIT 1 OFFSET ?3)`, r.TenantID, r.TaskID, s.cfg.MaxRuns)
		return err
	})
	return s.fail(ctx, "add run", err)
}

// UpdateRun implements [trigger.Store.UpdateRun]. A run recorded waiting
// for approvals that expire has its expiry queued in the same
// transaction.
func (s *Store) UpdateRun(ctx context.Context, r trigger.Run) error {
	if err := r.Check(); err != nil {
		return err
	}
	return s.fail(ctx, "update run", s.inTx(ctx, func(tx *sql.Tx) error { return s.writeRun(ctx, tx, r, nil) }))
}

// SwapRun implements [trigger.RunSwapper]: it replaces the run old.ID
// with r only while the stored run is old. When it ends a waiting run,
// the run's notice and the run a chained route queues are queued in the
// same transaction.
func (s *Store) SwapRun(ctx context.Context, old, r trigger.Run) error {
	if err := r.Check(); err != nil {
		return err
	}
	if old.ID != r.ID || old.TenantID != r.TenantID || old.TaskID != r.TaskID {
		return fmt.Errorf("%w: sqlitetrigger: swapping run %q for run %q", trigger.ErrInvalid, old.ID, r.ID)
	}
	return s.fail(ctx, "swap run", s.inTx(ctx, func(tx *sql.Tx) error {
		if err := s.writeRun(ctx, tx, r, &old); err != nil {
			return err
		}
		return s.settledInTx(ctx, tx, old, r)
	}))
}

// SettleRun implements [trigger.RunSettler]: the swap of SwapRun (with
// the notice and chained run it queues) and the update of t (with the
// run it queues when t is ACTIVE again) in one transaction, so that a
// process that dies after the settlement never leaves its task
// PENDING_APPROVAL.
func (s *Store) SettleRun(ctx context.Context, old, r trigger.Run, t *trigger.Task) error {
	if err := r.Check(); err != nil {
		return err
	}
	if old.ID != r.ID || old.TenantID != r.TenantID || old.TaskID != r.TaskID {
		return fmt.Errorf("%w: sqlitetrigger: swapping run %q for run %q", trigger.ErrInvalid, old.ID, r.ID)
	}
	if t == nil || r.TenantID != t.TenantID || r.TaskID != t.ID {
		return fmt.Errorf("%w: sqlitetrigger: run %q is not of the task given", trigger.ErrInvalid, r.ID)
	}
	return s.update(ctx, "settle run", t, func(tx *sql.Tx) error {
		if err := s.writeRun(ctx, tx, r, &old); err != nil {
			return err
		}
		return s.settledInTx(ctx, tx, old, r)
	})
}

// writeRun writes r in tx, when old is set only over a stored run equal
// to it, and queues the expiry of r's approvals when it waits.
func (s *Store) writeRun(ctx context.Context, tx *sql.Tx, r trigger.Run, old *trigger.Run) error {
	normRun(&r)
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	q, args := `UPDATE valet_trigger_runs SET run = ? WHERE tenant_id = ? AND task_id = ? AND id = ?`,
		[]any{string(data), r.TenantID, r.TaskID, r.ID}
	if old != nil {
		o := *old
		normRun(&o)
		od, err := json.Marshal(o)
		if err != nil {
			return err
		}
		q, args = q+` AND json(run) = json(?)`, append(args, string(od))
	}
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		var exists bool
		if old != nil {
			if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM valet_trigger_runs
				WHERE tenant_id = ? AND task_id = ? AND id = ?)`, r.TenantID, r.TaskID, r.ID).Scan(&exists); err != nil {
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
	var exists bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM valet_trigger_tasks WHERE tenant_id = ? AND id = ?)`,
		tenantID, taskID).Scan(&exists); err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	if !exists {
		return nil, fmt.Errorf("%w: tenant %q, task %q", trigger.ErrNotFound, tenantID, taskID)
	}
	lim := -1 // SQLite: no limit
	if limit > 0 {
		lim = limit
	}
	rows, err := s.db.QueryContext(ctx, `SELECT run FROM valet_trigger_runs WHERE tenant_id = ? AND task_id = ?
		ORDER BY seq DESC LIMIT ?`, tenantID, taskID, lim)
	if err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	defer rows.Close()
	out := []trigger.Run{}
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return nil, s.fail(ctx, "runs", err)
		}
		var r trigger.Run
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("sqlitetrigger: stored run: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail(ctx, "runs", err)
	}
	return out, nil
}
