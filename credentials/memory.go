package credentials

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// memoryUpdateAttempts is how many times Memory.Update calls fn when Saves
// keep landing between its read and its write.
const memoryUpdateAttempts = 10

// Memory is a Store in process memory, for tests and single-process bots:
// nothing survives the process. It keeps secrets unencrypted (they never
// leave memory) and shares no mutable bytes with callers: Save encodes
// creds into a Secret of its own, and Secrets are immutable.
//
// It implements Store, Updater and TenantDeleter, and is safe for
// concurrent use. The zero Memory is not usable; call NewMemory.
type Memory struct {
	mu    sync.Mutex
	rows  map[memKey]*memRow
	locks map[memKey]*memLock // Update's per-credential locks
	// rev numbers every write of the store, so a row deleted and saved
	// again never repeats a revision an Update is checking against.
	rev int64
}

type memKey struct{ tenant, service, account string }

type memRow struct {
	secret           Secret
	revision         int64
	created, updated time.Time
}

// memLock serialises Updates of one credential; refs counts the holders
// and waiters so the last one removes it.
type memLock struct {
	ch   chan struct{}
	refs int
}

var (
	_ Store         = (*Memory)(nil)
	_ Updater       = (*Memory)(nil)
	_ TenantDeleter = (*Memory)(nil)
)

// NewMemory returns an empty in-memory Store.
func NewMemory() *Memory {
	return &Memory{rows: make(map[memKey]*memRow), locks: make(map[memKey]*memLock)}
}

func memError(op, tenantID, service, account string, err error) error {
	return fmt.Errorf("credentials: %s (tenant %q, service %q, account %q): %w", op, tenantID, service, account, err)
}

// Save stores creds; see Store.Save.
func (m *Memory) Save(ctx context.Context, tenantID, service, account string, creds any) error {
	account, err := Normalize(tenantID, service, account)
	if err != nil {
		return err
	}
	s, err := Encode(creds)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return memError("save", tenantID, service, account, err)
	}
	k := memKey{tenantID, service, account}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now().Round(0)
	m.rev++
	if r, ok := m.rows[k]; ok {
		r.secret, r.revision, r.updated = s, m.rev, later(r.updated, now)
		return nil
	}
	m.rows[k] = &memRow{secret: s, revision: m.rev, created: now, updated: now}
	return nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Get returns the secret; see Store.Get.
func (m *Memory) Get(ctx context.Context, tenantID, service, account string) (Secret, error) {
	account, err := Normalize(tenantID, service, account)
	if err != nil {
		return Secret{}, err
	}
	if err := ctx.Err(); err != nil {
		return Secret{}, memError("get", tenantID, service, account, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.rows[memKey{tenantID, service, account}]
	if !ok {
		return Secret{}, memError("get", tenantID, service, account, ErrNotFound)
	}
	return r.secret, nil
}

// List returns metadata only; see Store.List.
func (m *Memory) List(ctx context.Context, tenantID, service string) ([]Info, error) {
	if err := CheckList(tenantID, service); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("credentials: list (tenant %q, service %q): %w", tenantID, service, err)
	}
	m.mu.Lock()
	var out []Info
	for k, r := range m.rows {
		if k.tenant == tenantID && (service == "" || k.service == service) {
			out = append(out, Info{TenantID: k.tenant, Service: k.service, Account: k.account, CreatedAt: r.created, UpdatedAt: r.updated})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Info) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Account, b.Account))
	})
	return out, nil
}

// Delete removes the credentials; see Store.Delete.
func (m *Memory) Delete(ctx context.Context, tenantID, service, account string) error {
	account, err := Normalize(tenantID, service, account)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return memError("delete", tenantID, service, account, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.rows, memKey{tenantID, service, account})
	return nil
}

// DeleteTenant removes every credential of the tenant; see
// TenantDeleter.
func (m *Memory) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	if err := checkName("tenant ID", tenantID, true); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("credentials: delete tenant %q: %w", tenantID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k := range m.rows {
		if k.tenant == tenantID {
			delete(m.rows, k)
			n++
		}
	}
	return n, nil
}

// Update changes the secret with fn; see Updater. Updates of one
// credential wait for each other (or for ctx); a Save between Update's
// read and write makes it call fn again with the saved secret, up to 10
// times, then fail with ErrConflict.
func (m *Memory) Update(ctx context.Context, tenantID, service, account string, fn func(ctx context.Context, old Secret) (any, error)) error {
	account, err := Normalize(tenantID, service, account)
	if err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%w: Update needs a func", ErrInvalid)
	}
	if err := ctx.Err(); err != nil {
		return memError("update", tenantID, service, account, err)
	}
	k := memKey{tenantID, service, account}
	unlock, err := m.lock(ctx, k)
	if err != nil {
		return memError("update", tenantID, service, account, err)
	}
	defer unlock()
	for range memoryUpdateAttempts {
		m.mu.Lock()
		r, ok := m.rows[k]
		var old Secret
		var rev int64
		if ok {
			old, rev = r.secret, r.revision
		}
		m.mu.Unlock()
		if !ok {
			return memError("update", tenantID, service, account, ErrNotFound)
		}
		v, err := fn(ctx, old)
		if err != nil {
			return err
		}
		s, err := Encode(v)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return memError("update", tenantID, service, account, err)
		}
		m.mu.Lock()
		r, ok = m.rows[k]
		switch {
		case !ok:
			m.mu.Unlock()
			return memError("update", tenantID, service, account, ErrNotFound)
		case r.revision == rev:
			m.rev++
			r.secret, r.revision, r.updated = s, m.rev, later(r.updated, time.Now().Round(0))
			m.mu.Unlock()
			return nil
		}
		m.mu.Unlock() // a Save landed in between: start again from it
	}
	return memError("update", tenantID, service, account, ErrConflict)
}

// lock takes k's Update lock, waiting until it is free or ctx ends.
func (m *Memory) lock(ctx context.Context, k memKey) (unlock func(), err error) {
	m.mu.Lock()
	l := m.locks[k]
	if l == nil {
		l = &memLock{ch: make(chan struct{}, 1)}
		m.locks[k] = l
	}
	l.refs++
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.locks, k)
		}
		m.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
