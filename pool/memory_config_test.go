package pool_test

import (
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/pool"
)

// newMemory returns a Memory configured by cfg, failing the test when
// NewMemory refuses cfg.
func newMemory(t testing.TB, cfg pool.MemoryConfig) *pool.Memory {
	t.Helper()
	m, err := pool.NewMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNewMemoryRejectsNegative: a negative setting is an error wrapping
// ErrInvalidConfig, as on redispool, not the default in disguise; zero
// still means the default.
func TestNewMemoryRejectsNegative(t *testing.T) {
	for _, cfg := range []pool.MemoryConfig{{MaxPerTenant: -1}, {Retention: -time.Second}} {
		m, err := pool.NewMemory(cfg)
		if !errors.Is(err, pool.ErrInvalidConfig) || m != nil {
			t.Errorf("NewMemory(%+v) = %v, %v; want nil, ErrInvalidConfig", cfg, m, err)
		}
	}
	if _, err := pool.NewMemory(pool.MemoryConfig{}); err != nil {
		t.Errorf("NewMemory(zero) = %v, want the defaults", err)
	}
}
