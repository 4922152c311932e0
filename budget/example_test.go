package budget_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/budget"
)

// A run's limits are checked before it starts, and what it used is
// compared with them after.
func Example() {
	lim := budget.Limits{MaxTokens: 20_000, MaxCostUSD: 0.05, MaxWall: 2 * time.Minute}
	fmt.Println("limits valid:", lim.Check() == nil)

	used := budget.Consumed{Tokens: 12_400, CostUSD: 0.031, Wall: 40 * time.Second, ToolCalls: 3}
	fmt.Println("usage valid:", used.Check() == nil)
	fmt.Printf("share of the token cap: %.0f%%\n", 100*float64(used.Tokens)/float64(lim.MaxTokens))

	bad := budget.Limits{MaxToolCalls: -1}
	fmt.Println("negative cap refused:", errors.Is(bad.Check(), budget.ErrInvalid))
	// Output:
	// limits valid: true
	// usage valid: true
	// share of the token cap: 62%
	// negative cap refused: true
}
