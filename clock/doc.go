// Package clock is the one clock every valet package reads the time
// from.
//
// Every Config that reads the time (agent.Config, agent.SpendLimitsConfig,
// memory.Config, pool.MemoryConfig, trigger.Config, trigger.MemoryStore,
// trigger.MemoryBus, rivertrigger.Config) has a field Clock of type
// [Clock]; nil means [System], the machine's clock. A [Clock] gives the
// time (Now) and single wake-ups (NewTimer, a [Timer]).
//
// In tests, make one clock/clocktest.Clock and hand the same one to
// everything you wire, so the orchestrator, its memory, its pool, the
// trigger engine and its store all agree on what time it is; then move
// it with Advance and Set instead of sleeping:
//
//	clk := clocktest.New(time.Date(2026, 3, 2, 7, 0, 0, 0, time.UTC))
//	mem, _ := memory.NewInMemory(memory.Config{Clock: clk})
//	orch, _ := agent.NewOrchestrator(agent.Config{LLM: model, Memory: mem, Clock: clk})
//	eng, _ := trigger.New(trigger.Config{Clock: clk, Executors: execs})
//	// …start eng.Run, then:
//	_ = clk.AwaitTimers(ctx, 1) // the scheduler is waiting
//	clk.Advance(time.Hour)     // 08:00: the daily task fires
//
// Package clock imports nothing but the standard library.
package clock
