package credentials

import (
	"context"
	"fmt"
)

// ForTenant returns s bound to one tenant: calls for tenantID go to s,
// calls naming any other tenant touch nothing and answer as if that tenant
// had no credentials — Get, Delete and Update return ErrNotFound, List an
// empty list — except Save, which fails with ErrTenantMismatch. An empty
// tenant ID is ErrInvalid, as with every Store.
//
// The orchestrator gives each tool call ForTenant(store, msg.TenantID) as
// tool.ExecContext.Credentials, so a tool cannot reach another tenant's
// secrets whatever tenant ID it passes.
//
// The result implements Updater when s does, and nothing else: it does
// not expose s, and a tool cannot erase its tenant (TenantDeleter) or
// rotate keys through it. ForTenant(nil, id) is nil.
func ForTenant(s Store, tenantID string) Store {
	if s == nil {
		return nil
	}
	b := tenantStore{s: s, tenant: tenantID}
	if u, ok := s.(Updater); ok {
		return &tenantUpdater{tenantStore: b, u: u}
	}
	return &b
}

type tenantStore struct {
	s      Store
	tenant string
}

type tenantUpdater struct {
	tenantStore
	u Updater
}

// other checks a call for another tenant: it returns the error to answer
// it with, wrapping want, or ErrInvalid for bad names.
func (b *tenantStore) other(ctx context.Context, op, tenantID, service, account string, want error) error {
	account, err := Normalize(tenantID, service, account)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil { // as any Store answers a done ctx
		return fmt.Errorf("credentials: %s: %w", op, err)
	}
	return fmt.Errorf("credentials: %s (service %q, account %q): %w", op, service, account, want)
}

func (b *tenantStore) Save(ctx context.Context, tenantID, service, account string, creds any) error {
	if tenantID != b.tenant {
		if _, err := Normalize(tenantID, service, account); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("credentials: save: %w", err)
		}
		return fmt.Errorf("credentials: save (tenant %q): %w; nothing was written", tenantID, ErrTenantMismatch)
	}
	return b.s.Save(ctx, tenantID, service, account, creds)
}

func (b *tenantStore) Get(ctx context.Context, tenantID, service, account string) (Secret, error) {
	if tenantID != b.tenant {
		return Secret{}, b.other(ctx, "get", tenantID, service, account, ErrNotFound)
	}
	return b.s.Get(ctx, tenantID, service, account)
}

func (b *tenantStore) List(ctx context.Context, tenantID, service string) ([]Info, error) {
	if tenantID != b.tenant {
		if err := CheckList(tenantID, service); err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("credentials: list: %w", err)
		}
		return nil, nil
	}
	return b.s.List(ctx, tenantID, service)
}

func (b *tenantStore) Delete(ctx context.Context, tenantID, service, account string) error {
	if tenantID != b.tenant {
		return b.other(ctx, "delete", tenantID, service, account, ErrNotFound)
	}
	return b.s.Delete(ctx, tenantID, service, account)
}

func (b *tenantUpdater) Update(ctx context.Context, tenantID, service, account string, fn func(ctx context.Context, old Secret) (any, error)) error {
	if tenantID != b.tenant {
		return b.other(ctx, "update", tenantID, service, account, ErrNotFound)
	}
	return b.u.Update(ctx, tenantID, service, account, fn)
}
