// Package clocktest provides the fake clock valet's tests, and yours,
// hand to everything they wire.
//
// [Clock] is a fake clock.Clock: time stands still until the test moves
// it with Advance or Set, and the timers it passes fire at once, so a
// scheduler runs a week of schedules in a millisecond. Give the same
// Clock to every Config's Clock field (agent.Config, memory.Config,
// pool.MemoryConfig, trigger.Config, …) so they all agree on the time:
//
//	clk := clocktest.New(time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC))
//	// start the code under test with clk as its Clock, then:
//	if err := clk.AwaitTimers(ctx, 1); err != nil { // it is waiting
//		t.Fatal(err)
//	}
//	clk.Advance(24 * time.Hour) // its timer fires
package clocktest
