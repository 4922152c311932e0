package trigger

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"
)

// DefaultMaxRuns is how many runs a MemoryStore keeps per task when its
// MaxRuns is zero.
const DefaultMaxRuns = 100

// MemoryStore is a Store in process memory: the default backend for one
// process. Its zero value is ready to use; set its fields before the
// first call, not after.
type MemoryStore struct {
	// MaxRuns is how many runs it keeps per task, the newest added.
	// Zero: DefaultMaxRuns.
	MaxRuns int
	// Clock gives CreatedAt and UpdatedAt. Nil: clock.System.
	Clock clock.Clock

	mu      sync.Mutex
	tenants map[string]map[string]*memTask
}

type memTask struct {
	task *Task
	runs []Run // oldest added first
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty MemoryStore with the defaults.
func NewMemoryStore() *MemoryStore { return &MemoryStore{} }

func (m *MemoryStore) now() time.Time {
	if m.Clock == nil {
		return time.Now()
	}
	return m.Clock.Now()
}

func (m *MemoryStore) maxRuns() int {
	if m.MaxRuns <= 0 {
		return DefaultMaxRuns
	}
	return m.MaxRuns
}

// find returns the tenant's task; the caller holds m.mu.
func (m *MemoryStore) find(tenantID, id string) (*memTask, error) {
	if err := checkTask(tenantID, id); err != nil {
		return nil, err
	}
	mt, ok := m.tenants[tenantID][id]
	if !ok {
		return nil, fmt.Errorf("%w: tenant %q, task %q", ErrNotFound, tenantID, id)
	}
	return mt, nil
}

// Create implements [Store.Create].
func (m *MemoryStore) Create(ctx context.Context, t *Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tenants[t.TenantID][t.ID]; ok {
		return fmt.Errorf("%w: tenant %q, task %q exists", ErrConflict, t.TenantID, t.ID)
	}
	now := m.now()
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	t.UpdatedAt = now
	t.Revision = 1
	if m.tenants == nil {
		m.tenants = make(map[string]map[string]*memTask)
	}
	tasks := m.tenants[t.TenantID]
	if tasks == nil {
		tasks = make(map[string]*memTask)
		m.tenants[t.TenantID] = tasks
	}
	tasks[t.ID] = &memTask{task: t.Clone()}
	return nil
}

// Get implements [Store.Get].
func (m *MemoryStore) Get(ctx context.Context, tenantID, id string) (*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.find(tenantID, id)
	if err != nil {
		return nil, err
	}
	return mt.task.Clone(), nil
}

// List implements [Store.List].
func (m *MemoryStore) List(ctx context.Context, tenantID string, statuses ...Status) ([]*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkID("tenant ID", tenantID); err != nil {
		return nil, err
	}
	for _, s := range statuses {
		if err := s.Check(); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Task
	for _, mt := range m.tenants[tenantID] {
		if len(statuses) == 0 || slices.Contains(statuses, mt.task.Status) {
			out = append(out, mt.task.Clone())
		}
	}
	slices.SortFunc(out, func(a, b *Task) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Update implements [Store.Update].
func (m *MemoryStore) Update(ctx context.Context, t *Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := t.Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.find(t.TenantID, t.ID)
	if err != nil {
		return err
	}
	if mt.task.Revision != t.Revision {
		return fmt.Errorf("%w: tenant %q, task %q: revision %d, stored %d",
			ErrConflict, t.TenantID, t.ID, t.Revision, mt.task.Revision)
	}
	t.CreatedAt = mt.task.CreatedAt
	t.UpdatedAt = m.now()
	t.Revision++
	mt.task = t.Clone()
	return nil
}

// Delete implements [Store.Delete].
func (m *MemoryStore) Delete(ctx context.Context, tenantID, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := m.find(tenantID, id); err != nil {
		return err
	}
	delete(m.tenants[tenantID], id)
	if len(m.tenants[tenantID]) == 0 {
		delete(m.tenants, tenantID)
	}
	return nil
}

// AddRun implements [Store.AddRun], keeping the newest MaxRuns runs.
func (m *MemoryStore) AddRun(ctx context.Context, r Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.find(r.TenantID, r.TaskID)
	if err != nil {
		return err
	}
	if slices.ContainsFunc(mt.runs, func(x Run) bool { return x.ID == r.ID }) {
		return fmt.Errorf("%w: tenant %q, task %q: run %q exists", ErrConflict, r.TenantID, r.TaskID, r.ID)
	}
	mt.runs = append(mt.runs, cloneRun(r))
	if over := len(mt.runs) - m.maxRuns(); over > 0 {
		mt.runs = slices.Delete(mt.runs, 0, over)
	}
	return nil
}

// UpdateRun implements [Store.UpdateRun].
func (m *MemoryStore) UpdateRun(ctx context.Context, r Run) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := r.Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.find(r.TenantID, r.TaskID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(mt.runs, func(x Run) bool { return x.ID == r.ID })
	if i < 0 {
		return fmt.Errorf("%w: tenant %q, task %q: run %q", ErrNotFound, r.TenantID, r.TaskID, r.ID)
	}
	mt.runs[i] = cloneRun(r)
	return nil
}

// Runs implements [Store.Runs].
func (m *MemoryStore) Runs(ctx context.Context, tenantID, taskID string, limit int) ([]Run, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("%w: negative limit %d", ErrInvalid, limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, err := m.find(tenantID, taskID)
	if err != nil {
		return nil, err
	}
	n := len(mt.runs)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]Run, 0, n)
	for i := len(mt.runs) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, cloneRun(mt.runs[i]))
	}
	return out, nil
}

// Due implements [Store.Due]. It scans every task, keeping the first
// limit in order.
func (m *MemoryStore) Due(ctx context.Context, now time.Time, limit int) ([]*Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d, must be positive", ErrInvalid, limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	// Keep the first limit in order as the scan goes: a scheduler asks
	// for a few of many tasks, and sorting them all on every dispatch
	// was most of its time with 10,000 tasks.
	due := make([]*Task, 0, min(limit, 64))
	for _, tasks := range m.tenants {
		for _, mt := range tasks {
			t := mt.task
			if t.Status != StatusActive || t.NextRun.IsZero() || t.NextRun.After(now) {
				continue
			}
			if len(due) == limit && dueOrder(t, due[limit-1]) >= 0 {
				continue
			}
			i, _ := slices.BinarySearchFunc(due, t, dueOrder)
			if len(due) == limit {
				due = due[:limit-1]
			}
			due = slices.Insert(due, i, t)
		}
	}
	for i, t := range due {
		due[i] = t.Clone()
	}
	return due, nil
}

// dueOrder is the order of Store.Due.
func dueOrder(a, b *Task) int {
	return cmp.Or(
		a.NextRun.Compare(b.NextRun),
		cmp.Compare(b.Priority, a.Priority),
		cmp.Compare(a.TenantID, b.TenantID),
		cmp.Compare(a.ID, b.ID),
	)
}
