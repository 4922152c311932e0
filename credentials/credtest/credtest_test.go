package credtest_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/credtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The suites run here on sealed, a small encrypting store in memory, so
// that they are checked without PostgreSQL. It also shows what
// RunEncrypted asks of a store: seal with the primary key, keep a key
// check per key id and compare it before writing, rotate.

func TestSealedStore(t *testing.T) {
	credtest.Run(t, func(t *testing.T) credentials.Store {
		ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": bytes.Repeat([]byte{7}, 32)})
		if err != nil {
			t.Fatal(err)
		}
		return (&storage{}).open(ring)
	})
}

func TestSealedStoreEncrypted(t *testing.T) {
	credtest.RunEncrypted(t, func(t *testing.T) credtest.Backing { return &storage{} })
}

type storage struct {
	mu     sync.Mutex
	rows   map[credtest.Name]*row
	checks map[string]credentials.Sealed // key id → key check
	update sync.Mutex                    // serialises Updates
}

type row struct {
	sealed           credentials.Sealed
	created, updated time.Time
}

func (st *storage) open(ring *credentials.KeyRing) *sealed {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.rows == nil {
		st.rows = make(map[credtest.Name]*row)
		st.checks = make(map[string]credentials.Sealed)
	}
	return &sealed{st: st, ring: ring}
}

func (st *storage) Open(t *testing.T, ring *credentials.KeyRing) credentials.Store {
	return st.open(ring)
}

func (st *storage) Rows(t *testing.T) []credtest.Row {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []credtest.Row
	for n, r := range st.rows {
		raw := bytes.Join([][]byte{[]byte(r.sealed.KeyID), r.sealed.Nonce, r.sealed.Ciphertext, []byte(r.updated.String())}, nil)
		out = append(out, credtest.Row{Name: n, KeyID: r.sealed.KeyID, Raw: raw})
	}
	return out
}

func (st *storage) Copy(t *testing.T, from, to credtest.Name) {
	st.mu.Lock()
	defer st.mu.Unlock()
	r, ok := st.rows[from]
	if !ok {
		t.Fatalf("no row %v", from)
	}
	c := *r
	st.rows[to] = &c
}

type sealed struct {
	st   *storage
	ring *credentials.KeyRing
}

func (s *sealed) name(tenantID, service, account string) (credtest.Name, error) {
	account, err := credentials.Normalize(tenantID, service, account)
	return credtest.Name{TenantID: tenantID, Service: service, Account: account}, err
}

// checkKey registers or compares id's key check; st.mu is held.
func (s *sealed) checkKey(id string, register bool) error {
	c, ok := s.st.checks[id]
	if !ok {
		if !register {
			return nil
		}
		fresh, err := s.ring.KeyCheck(id)
		if err != nil {
			return err
		}
		s.st.checks[id] = fresh
		return nil
	}
	return s.ring.VerifyKeyCheck(c)
}

// openRow decrypts; st.mu is held.
func (s *sealed) openRow(n credtest.Name, r *row) (credentials.Secret, error) {
	sec, err := s.ring.Open(n.TenantID, n.Service, n.Account, r.sealed)
	if errors.Is(err, credentials.ErrDecrypt) {
		if kerr := s.checkKey(r.sealed.KeyID, false); kerr != nil {
			return sec, kerr
		}
	}
	return sec, err
}

// write seals sec for n and stores it; st.mu is held.
func (s *sealed) write(n credtest.Name, sec credentials.Secret) error {
	if err := s.checkKey(s.ring.PrimaryID(), true); err != nil {
		return err
	}
	sl, err := s.ring.Seal(n.TenantID, n.Service, n.Account, sec)
	if err != nil {
		return err
	}
	now := time.Now()
	if r, ok := s.st.rows[n]; ok {
		r.sealed, r.updated = sl, now
		return nil
	}
	s.st.rows[n] = &row{sealed: sl, created: now, updated: now}
	return nil
}

func (s *sealed) Save(ctx context.Context, tenantID, service, account string, creds any) error {
	n, err := s.name(tenantID, service, account)
	if err != nil {
		return err
	}
	sec, err := credentials.Encode(creds)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.write(n, sec)
}

func (s *sealed) Get(ctx context.Context, tenantID, service, account string) (credentials.Secret, error) {
	n, err := s.name(tenantID, service, account)
	if err != nil {
		return credentials.Secret{}, err
	}
	if err := ctx.Err(); err != nil {
		return credentials.Secret{}, err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	r, ok := s.st.rows[n]
	if !ok {
		return credentials.Secret{}, fmt.Errorf("get %v: %w", n, credentials.ErrNotFound)
	}
	return s.openRow(n, r)
}

func (s *sealed) List(ctx context.Context, tenantID, service string) ([]credentials.Info, error) {
	if err := credentials.CheckList(tenantID, service); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	var out []credentials.Info
	for n, r := range s.st.rows {
		if n.TenantID == tenantID && (service == "" || n.Service == service) {
			out = append(out, credentials.Info{TenantID: n.TenantID, Service: n.Service, Account: n.Account, CreatedAt: r.created, UpdatedAt: r.updated})
		}
	}
	slices.SortFunc(out, func(a, b credentials.Info) int {
		return cmp.Or(cmp.Compare(a.Service, b.Service), cmp.Compare(a.Account, b.Account))
	})
	return out, nil
}

func (s *sealed) Delete(ctx context.Context, tenantID, service, account string) error {
	n, err := s.name(tenantID, service, account)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	delete(s.st.rows, n)
	return nil
}

func (s *sealed) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	if err := credentials.CheckList(tenantID, ""); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	k := 0
	for n := range s.st.rows {
		if n.TenantID == tenantID {
			delete(s.st.rows, n)
			k++
		}
	}
	return k, nil
}

// Update holds the storage's update lock while fn runs: simple, and
// enough here because Saves also take st.mu and fn never calls the store.
func (s *sealed) Update(ctx context.Context, tenantID, service, account string, fn func(context.Context, credentials.Secret) (any, error)) error {
	n, err := s.name(tenantID, service, account)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.st.update.Lock()
	defer s.st.update.Unlock()
	s.st.mu.Lock()
	if err := s.checkKey(s.ring.PrimaryID(), true); err != nil {
		s.st.mu.Unlock()
		return err
	}
	r, ok := s.st.rows[n]
	if !ok {
		s.st.mu.Unlock()
		return fmt.Errorf("update %v: %w", n, credentials.ErrNotFound)
	}
	old, err := s.openRow(n, r)
	s.st.mu.Unlock()
	if err != nil {
		return err
	}
	v, err := fn(ctx, old)
	if err != nil {
		return err
	}
	sec, err := credentials.Encode(v)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	return s.write(n, sec)
}

func (s *sealed) Rotate(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.st.mu.Lock()
	defer s.st.mu.Unlock()
	if err := s.checkKey(s.ring.PrimaryID(), true); err != nil {
		return 0, err
	}
	k := 0
	var errs []error
	for n, r := range s.st.rows {
		if r.sealed.KeyID == s.ring.PrimaryID() {
			continue
		}
		sec, err := s.openRow(n, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sl, err := s.ring.Seal(n.TenantID, n.Service, n.Account, sec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.sealed = sl
		k++
	}
	return k, errors.Join(errs...)
}
