package agent_test

import (
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/spendtest"
)

// The in-memory SpendLimits passes the SpendGuard conformance suite (its
// "replicas" are one guard).
func TestSpendLimitsConformance(t *testing.T) {
	spendtest.Run(t, func(t *testing.T, cfg agent.SpendLimitsConfig) func() spendtest.Guard {
		g, err := agent.NewSpendLimits(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return func() spendtest.Guard { return spendtest.Memory(g) }
	})
}
