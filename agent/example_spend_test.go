package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/valetkit/valet/agent"
)

// Each model call reserves its largest cost before it is made: two calls
// of $0.60 in flight hold $1.20 of a $1 daily limit, so a third is refused
// until they settle with what they really cost.
func ExampleSpendLimits_Reserve() {
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}})
	if err != nil {
		panic(err)
	}
	ctx := agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: "acme", Source: agent.SourceTrigger, TaskID: "digest"})
	first, _ := g.Reserve(ctx, "acme", 0.6)
	second, _ := g.Reserve(ctx, "acme", 0.6)
	_, err = g.Reserve(ctx, "acme", 0.6)
	var refusal *agent.RefusalError
	fmt.Println(errors.As(err, &refusal), refusal.Reason)

	_ = first(ctx, 0.1) // what the calls really cost
	_ = second(ctx, 0.2)
	day, _ := g.Spent("acme")
	_, err = g.Reserve(ctx, "acme", 0.6)
	fmt.Printf("spent $%.2f, next call reserved: %v\n", day, err == nil)
	// Output:
	// true Your daily spending limit of $1.00 is reached. Please try again tomorrow.
	// spent $0.30, next call reserved: true
}
