package pool_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/pooltest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestMemory(t *testing.T) {
	pooltest.Run(t, func(t *testing.T, maxPerTenant int, retention time.Duration) pool.Store {
		return newMemory(t, pool.MemoryConfig{MaxPerTenant: maxPerTenant, Retention: retention})
	})
}

func TestMemoryLocker(t *testing.T) {
	pooltest.RunLocker(t, func(t *testing.T) pool.Locker { return pool.NewMemoryLocker() })
}
