package agent_test

import (
	"math"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
)

// Cache reads and writes are priced apart from the rest of the input:
// Claude's at 0.1× and 1.25× the input price.
func TestPriceCostPricesCacheReadsAndWrites(t *testing.T) {
	p, ok := agent.DefaultPrices().Lookup("claude-sonnet-4-5-20250929")
	if !ok {
		t.Fatal("claude-sonnet-4-5-20250929 has no default price")
	}
	u := llm.Usage{InputTokens: 1_000_000 + 2_000_000 + 4_000_000, CacheReadTokens: 2_000_000, CacheWriteTokens: 4_000_000, OutputTokens: 1_000_000}
	// 1M uncached × $3 + 2M read × $0.30 + 4M written × $3.75 + 1M out × $15
	want := 3 + 0.6 + 15 + 15.0
	if got := p.Cost(u); math.Abs(got-want) > 1e-9 {
		t.Errorf("Cost(%+v) = %v, want %v", u, got, want)
	}
	if u.Uncached() != 1_000_000 {
		t.Errorf("Uncached = %d", u.Uncached())
	}
	// A price without cache prices bills cached input as input.
	plain := agent.Price{InputPerMillion: 2, OutputPerMillion: 8}
	if got := plain.Cost(llm.Usage{InputTokens: 1_000_000, CacheReadTokens: 500_000}); math.Abs(got-2) > 1e-9 {
		t.Errorf("no cache prices: %v, want 2", got)
	}
	sum := llm.Usage{InputTokens: 1, CacheReadTokens: 2, CacheWriteTokens: 3, OutputTokens: 4}.Add(llm.Usage{InputTokens: 10, CacheReadTokens: 20, CacheWriteTokens: 30, OutputTokens: 40})
	if sum != (llm.Usage{InputTokens: 11, CacheReadTokens: 22, CacheWriteTokens: 33, OutputTokens: 44}) {
		t.Errorf("Add = %+v", sum)
	}
}
