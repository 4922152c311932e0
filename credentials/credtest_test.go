package credentials_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/credtest"
)

func TestMemoryConformance(t *testing.T) {
	credtest.Run(t, func(t *testing.T) credentials.Store { return credentials.NewMemory() })
}

// TestForTenantConformance runs the suite with every call going through
// ForTenant of the call's own tenant, as the orchestrator binds the store
// to each message's tenant: binding changes nothing for that tenant.
func TestForTenantConformance(t *testing.T) {
	credtest.Run(t, func(t *testing.T) credentials.Store { return perCall{credentials.NewMemory()} })
}

type perCall struct{ m *credentials.Memory }

func (p perCall) Save(ctx context.Context, tenantID, service, account string, creds any) error {
	return credentials.ForTenant(p.m, tenantID).Save(ctx, tenantID, service, account, creds)
}

func (p perCall) Get(ctx context.Context, tenantID, service, account string) (credentials.Secret, error) {
	return credentials.ForTenant(p.m, tenantID).Get(ctx, tenantID, service, account)
}

func (p perCall) List(ctx context.Context, tenantID, service string) ([]credentials.Info, error) {
	return credentials.ForTenant(p.m, tenantID).List(ctx, tenantID, service)
}

func (p perCall) Delete(ctx context.Context, tenantID, service, account string) error {
	return credentials.ForTenant(p.m, tenantID).Delete(ctx, tenantID, service, account)
}

func (p perCall) Update(ctx context.Context, tenantID, service, account string, fn func(context.Context, credentials.Secret) (any, error)) error {
	return credentials.ForTenant(p.m, tenantID).(credentials.Updater).Update(ctx, tenantID, service, account, fn)
}

func (p perCall) DeleteTenant(ctx context.Context, tenantID string) (int, error) {
	return p.m.DeleteTenant(ctx, tenantID)
}
