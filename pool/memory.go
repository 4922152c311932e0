package pool

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"
)

// MemoryConfig configures [NewMemory]. The zero value means the
// documented defaults; a zero number means its default and a negative one
// is refused by NewMemory.
type MemoryConfig struct {
	// MaxPerTenant is how many unexpired entries one tenant may hold;
	// Create past it fails with ErrTenantFull. Negative is an error.
	// Default: DefaultMaxPerTenant.
	MaxPerTenant int
	// Clock is the store's clock. Nil: clock.System.
	Clock clock.Clock
	// Retention is how long an entry stays readable after its ExpiresAt
	// (Expired then reports true). Negative is an error.
	// Default: DefaultRetention (an hour).
	Retention time.Duration
}

// withDefaults returns c with every zero field set to its default, or an
// error wrapping ErrInvalidConfig naming the negative field it refuses.
func (c MemoryConfig) withDefaults() (MemoryConfig, error) {
	if c.MaxPerTenant < 0 {
		return c, fmt.Errorf("%w: negative MaxPerTenant %d", ErrInvalidConfig, c.MaxPerTenant)
	}
	if c.Retention < 0 {
		return c, fmt.Errorf("%w: negative Retention %v", ErrInvalidConfig, c.Retention)
	}
	c.MaxPerTenant = cmp.Or(c.MaxPerTenant, DefaultMaxPerTenant)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.Clock = clock.Or(c.Clock)
	return c, nil
}

// Memory is a [Store] that keeps entries in the process. It is safe for
// concurrent use; entries do not survive a restart and are not shared
// between processes (use pool/redispool for that).
type Memory struct {
	max       int
	retention time.Duration
	now       func() time.Time

	mu        sync.Mutex
	tenants   map[string]map[string]*Entry // tenant → id → entry
	lastSweep time.Time
}

var _ Store = (*Memory)(nil)

// sweepEvery is how often Create looks through all tenants for entries
// whose retention has ended; each tenant's own entries are also dropped
// whenever that tenant is used.
const sweepEvery = time.Minute

// NewMemory returns an empty in-memory store configured by cfg; the zero
// MemoryConfig means the defaults. A negative setting is an error
// wrapping ErrInvalidConfig, as on every other backend.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Memory{
		max:       cfg.MaxPerTenant,
		retention: cfg.Retention,
		now:       cfg.Clock.Now,
		tenants:   make(map[string]map[string]*Entry),
	}, nil
}

// Create adds a copy of e; see [Store.Create]. It sets e.Revision to 1
// and e.CreatedAt and e.UpdatedAt to now when they are zero.
func (m *Memory) Create(ctx context.Context, e *Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	if now.Sub(m.lastSweep) >= sweepEvery {
		m.sweepAll(now)
	}
	entries := m.tenant(e.TenantID, now)
	if _, ok := entries[e.ID]; ok {
		return fmt.Errorf("%w: tenant %q, id %q", ErrExists, e.TenantID, e.ID)
	}
	live := 0
	for _, x := range entries {
		if !x.Expired(now) {
			live++
		}
	}
	if live >= m.max {
		return fmt.Errorf("%w: tenant %q holds %d unexpired entries (the cap)", ErrTenantFull, e.TenantID, live)
	}
	e.Revision = 1
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	if e.UpdatedAt.IsZero() {
		e.UpdatedAt = now
	}
	if entries == nil {
		entries = make(map[string]*Entry)
		m.tenants[e.TenantID] = entries
	}
	entries[e.ID] = e.Clone()
	return nil
}

// Update replaces the stored entry with a copy of e if the revisions
// match; see [Store.Update]. It increments e.Revision and sets e.UpdatedAt
// to now. e.CreatedAt is stored as given and must not be zero.
func (m *Memory) Update(ctx context.Context, e *Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkUpdate(e); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	cur, ok := m.tenant(e.TenantID, now)[e.ID]
	if !ok {
		return fmt.Errorf("%w: tenant %q, id %q", ErrNotFound, e.TenantID, e.ID)
	}
	if cur.Revision != e.Revision {
		return fmt.Errorf("%w: tenant %q, id %q: revision %d, stored %d", ErrConflict, e.TenantID, e.ID, e.Revision, cur.Revision)
	}
	e.Revision++
	e.UpdatedAt = now
	m.tenants[e.TenantID][e.ID] = e.Clone()
	return nil
}

// checkUpdate is Check plus what Update needs beyond Create.
func checkUpdate(e *Entry) error {
	if err := e.Check(); err != nil {
		return err
	}
	if e.CreatedAt.IsZero() {
		return fmt.Errorf("%w: zero CreatedAt in an update (entry %q); update the entry Get returned", ErrInvalidEntry, e.ID)
	}
	return nil
}

// Get returns a copy of the tenant's entry; see [Store.Get].
func (m *Memory) Get(ctx context.Context, tenantID, id string) (*Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.tenant(tenantID, m.clock())[id]
	if !ok {
		return nil, fmt.Errorf("%w: tenant %q, id %q", ErrNotFound, tenantID, id)
	}
	return e.Clone(), nil
}

// List returns copies of the tenant's entries, oldest CreatedAt first,
// ties broken by ID.
func (m *Memory) List(ctx context.Context, tenantID string) ([]*Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	entries := m.tenant(tenantID, m.clock())
	out := make([]*Entry, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Clone())
	}
	m.mu.Unlock()
	sortEntries(out)
	return out, nil
}

// sortEntries sorts entries the way List returns them: oldest CreatedAt
// first, ties broken by ID.
func sortEntries(entries []*Entry) {
	slices.SortFunc(entries, func(a, b *Entry) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// Take removes the tenant's entry and returns it; see [Store.Take].
func (m *Memory) Take(ctx context.Context, tenantID, id string) (*Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.tenant(tenantID, m.clock())
	e, ok := entries[id]
	if !ok {
		return nil, fmt.Errorf("%w: tenant %q, id %q", ErrNotFound, tenantID, id)
	}
	m.remove(tenantID, id)
	return e, nil // the stored copy; nobody else holds it any more
}

// TakeRevision removes the tenant's entry and returns it if its Revision
// is revision; see [Store.TakeRevision].
func (m *Memory) TakeRevision(ctx context.Context, tenantID, id string, revision int64) (*Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.tenant(tenantID, m.clock())[id]
	if !ok {
		return nil, fmt.Errorf("%w: tenant %q, id %q", ErrNotFound, tenantID, id)
	}
	if e.Revision != revision {
		return nil, fmt.Errorf("%w: tenant %q, id %q: revision %d, stored %d", ErrConflict, tenantID, id, revision, e.Revision)
	}
	m.remove(tenantID, id)
	return e, nil // the stored copy; nobody else holds it any more
}

// Delete removes the tenant's entry; see [Store.Delete].
func (m *Memory) Delete(ctx context.Context, tenantID, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tenant(tenantID, m.clock())[id]; !ok {
		return fmt.Errorf("%w: tenant %q, id %q", ErrNotFound, tenantID, id)
	}
	m.remove(tenantID, id)
	return nil
}

// clock returns now without a monotonic reading, so stored times compare
// and print like times read back from any other store.
func (m *Memory) clock() time.Time { return m.now().Round(0) }

// tenant drops the tenant's entries whose retention has ended and returns
// what is left (nil when nothing). Callers hold m.mu.
func (m *Memory) tenant(tenantID string, now time.Time) map[string]*Entry {
	entries := m.tenants[tenantID]
	for id, e := range entries {
		if m.gone(e, now) {
			delete(entries, id)
		}
	}
	if entries != nil && len(entries) == 0 {
		delete(m.tenants, tenantID)
		return nil
	}
	return entries
}

// sweepAll drops every entry whose retention has ended. Callers hold m.mu.
func (m *Memory) sweepAll(now time.Time) {
	for tenantID := range m.tenants {
		m.tenant(tenantID, now)
	}
	m.lastSweep = now
}

func (m *Memory) remove(tenantID, id string) {
	entries := m.tenants[tenantID]
	delete(entries, id)
	if len(entries) == 0 {
		delete(m.tenants, tenantID)
	}
}

func (m *Memory) gone(e *Entry, now time.Time) bool {
	return !now.Before(e.ExpiresAt.Add(m.retention))
}

// MemoryLocker is a [Locker] for one process: it serialises work on a key
// across goroutines. Keys nobody holds or waits for take no memory.
type MemoryLocker struct {
	mu   sync.Mutex
	keys map[string]*memLock
}

// memLock is one key's lock: a token in a channel of capacity one, taken
// to hold the key and put back to release it. refs counts the holder and
// the waiters, so the entry can be dropped when it reaches zero.
type memLock struct {
	token chan struct{}
	refs  int
}

var _ Locker = (*MemoryLocker)(nil)

// NewMemoryLocker returns a Locker for the goroutines of one process.
func NewMemoryLocker() *MemoryLocker {
	return &MemoryLocker{keys: make(map[string]*memLock)}
}

// Lock blocks until key is held or ctx ends (then it returns ctx.Err()).
// The returned release is safe to call more than once.
func (l *MemoryLocker) Lock(ctx context.Context, key string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	k := l.keys[key]
	if k == nil {
		k = &memLock{token: make(chan struct{}, 1)}
		k.token <- struct{}{}
		l.keys[key] = k
	}
	k.refs++
	l.mu.Unlock()

	select {
	case <-k.token:
	case <-ctx.Done():
		l.unref(key, k)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			k.token <- struct{}{}
			l.unref(key, k)
		})
	}, nil
}

func (l *MemoryLocker) unref(key string, k *memLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k.refs--
	if k.refs == 0 {
		delete(l.keys, key)
	}
}
