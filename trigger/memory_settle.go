package trigger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
)

var _ RunSettler = (*MemoryStore)(nil)

// SwapRun implements [RunSwapper]: it replaces the run old.ID with r only
// while the stored run is still old (compared as JSON, every field), under
// the store's lock.
func (m *MemoryStore) SwapRun(ctx context.Context, old, r Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSwap(old, r); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, i, err := m.findSwap(old, r)
	if err != nil {
		return err
	}
	mt.runs[i] = cloneRun(r)
	return nil
}

// SettleRun implements [RunSettler]: SwapRun(ctx, old, r) and Update(ctx,
// t) under the store's lock, each checked before either is written.
func (m *MemoryStore) SettleRun(ctx context.Context, old, r Run, t *Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkSwap(old, r); err != nil {
		return err
	}
	if err := t.Check(); err != nil {
		return err
	}
	if t.TenantID != r.TenantID || t.ID != r.TaskID {
		return fmt.Errorf("%w: run %q is not of task %q", ErrInvalid, r.ID, t.ID)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, i, err := m.findSwap(old, r)
	if err != nil {
		return err
	}
	if mt.task.Revision != t.Revision {
		return fmt.Errorf("%w: tenant %q, task %q: revision %d, stored %d",
			ErrConflict, t.TenantID, t.ID, t.Revision, mt.task.Revision)
	}
	mt.runs[i] = cloneRun(r)
	t.CreatedAt = mt.task.CreatedAt
	t.UpdatedAt = m.now()
	t.Revision++
	mt.task = t.Clone()
	return nil
}

func checkSwap(old, r Run) error {
	if err := r.Check(); err != nil {
		return err
	}
	if old.ID != r.ID || old.TenantID != r.TenantID || old.TaskID != r.TaskID {
		return fmt.Errorf("%w: swapping run %q for run %q", ErrInvalid, old.ID, r.ID)
	}
	return nil
}

// findSwap returns the task of r and the index of its run, which must be
// old; the caller holds m.mu.
func (m *MemoryStore) findSwap(old, r Run) (*memTask, int, error) {
	mt, err := m.find(r.TenantID, r.TaskID)
	if err != nil {
		return nil, 0, err
	}
	i := slices.IndexFunc(mt.runs, func(x Run) bool { return x.ID == r.ID })
	if i < 0 {
		return nil, 0, fmt.Errorf("%w: tenant %q, task %q: run %q", ErrNotFound, r.TenantID, r.TaskID, r.ID)
	}
	stored, err := json.Marshal(mt.runs[i])
	if err != nil {
		return nil, 0, err
	}
	want, err := json.Marshal(old)
	if err != nil {
		return nil, 0, err
	}
	if !bytes.Equal(stored, want) {
		return nil, 0, fmt.Errorf("%w: tenant %q, task %q: run %q changed meanwhile", ErrConflict, r.TenantID, r.TaskID, r.ID)
	}
	return mt, i, nil
}

// cloneRun returns r sharing no slice with its caller.
func cloneRun(r Run) Run {
	r.Approvals = slices.Clone(r.Approvals)
	return r
}
