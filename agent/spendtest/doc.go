// Package spendtest is the conformance suite of agent.SpendGuard
// implementations built on agent.SpendLimitsConfig: the in-memory
// agent.SpendLimits and agent/pgspend's guard both pass it, and a guard of
// your own can too.
//
// Run checks, through the guard's API and an orchestrator with a scripted
// model: daily and monthly limits per tenant (PerTenant, Tenant) and for all
// tenants (Global), in the configured time zone and driven by the
// configured clock (no sleeps); alerts at each threshold delivered once,
// also when two guard values (two replicas) share the store; PauseAll,
// PauseNonCritical and AlertOnly; the *agent.RefusalError of a refused
// run; tenants kept apart; and reservations (agent.SpendReserver): held
// until settled or their TTL, settled once, and never letting concurrent
// calls on two replicas overshoot a limit by more than one reservation.
//
//	spendtest.Run(t, func(t *testing.T, cfg agent.SpendLimitsConfig) func() spendtest.Guard {
//		g, err := agent.NewSpendLimits(cfg)
//		if err != nil {
//			t.Fatal(err)
//		}
//		return func() spendtest.Guard { return spendtest.Memory(g) }
//	})
package spendtest
