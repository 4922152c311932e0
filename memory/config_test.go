package memory_test

import (
	"errors"
	"testing"
	"time"

	"github.com/valetkit/valet/memory"
)

// newMem returns an InMemory configured by cfg, failing the test when
// NewInMemory refuses cfg.
func newMem(t testing.TB, cfg memory.Config) *memory.InMemory {
	t.Helper()
	m, err := memory.NewInMemory(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNewInMemoryRejectsNegative: a negative bound or IdleTTL is an error
// wrapping ErrInvalid, as the other backends refuse it, not the default
// in disguise; zero still means the default.
func TestNewInMemoryRejectsNegative(t *testing.T) {
	for _, cfg := range []memory.Config{
		{IdleTTL: -time.Second},
		{MaxConversations: -1},
		{MaxItems: -1},
		{MaxItemsPerTenant: -1},
		{MaxMessages: -1},
	} {
		m, err := memory.NewInMemory(cfg)
		if !errors.Is(err, memory.ErrInvalid) || m != nil {
			t.Errorf("NewInMemory(%+v) = %v, %v; want nil, ErrInvalid", cfg, m, err)
		}
	}
	if _, err := memory.NewInMemory(memory.Config{}); err != nil {
		t.Errorf("NewInMemory(zero) = %v, want the defaults", err)
	}
}
