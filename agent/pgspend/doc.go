// Package pgspend is an agent.SpendGuard on PostgreSQL (github.com/jackc/pgx/v5):
// the daily and monthly spending limits of agent.SpendLimits, per tenant
// and for all tenants together, shared by every replica on the same tables
// and kept across restarts.
//
//	db, err := pgxpool.New(ctx, url) // yours to configure and close
//	guard, err := pgspend.New(db, pgspend.Config{
//		SpendLimitsConfig: agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 5}},
//		Schema:            "valet",
//	})
//	err = guard.Migrate(ctx) // once per start; idempotent
//	orch, err := agent.NewOrchestrator(agent.Config{SpendGuard: guard, Prices: prices, ...})
//
// The limits, alert thresholds, OnLimit action (PauseAll, PauseNonCritical,
// AlertOnly), time zone (Location: where days and months begin) and clock are
// agent.SpendLimitsConfig's, with the same meaning and the same refusals
// (agent.SpendLimitsConfig.Refusal); both guards pass agent/spendtest's
// conformance suite. The replicas' clocks must agree: the clock decides the
// day, the month and when a reservation expires.
//
// # Tables
//
// Migrate creates, if they do not exist (the schema must exist), under an
// advisory lock:
//
//	valet_spend        tenant_id ('' for all tenants), period ('day' or 'month'),
//	                   key ('2026-11-30', '2026-11'), spent_usd, alerts (how many
//	                   thresholds were reported)
//	valet_spend_holds  id, tenant_id, day, month, usd, expires_at: the
//	                   reservations of model calls in flight
//
// Rows of past periods are kept (one per tenant, day and month): delete
// them when you no longer need them.
//
// # Reservations
//
// Guard is an agent.SpendReserver: the orchestrator reserves each model
// call's largest cost before making it, and settles it with the real cost
// after. Reserve locks the tenant's two rows of the period (and the global
// ones when a global limit is set) while it adds what is spent and held,
// decides, and inserts its hold, so reservations of every replica are
// counted one after another: with any number of replicas and runs, a
// limit is passed by at most one call's reservation. Settling deletes the
// hold and adds the cost in one transaction, to the day and month the
// hold was reserved in (a call in flight at midnight counts in the day
// that held it, never in the new day, whose reservations did not see
// it). A hold never settled — its process died mid-call, or the database
// failed both the settlement and Record — is charged as spent at its
// reserved amount, the call's maximum, once ReserveTTL (default
// agent.DefaultReserveTTL) passes: the next Check moves it into the
// spend (never undercounting; a settlement arriving later adds only what
// its cost exceeds the reservation by). A call refused only
// because of the holds of calls in flight (what is spent alone is below
// the limit) is refused at once, or, with ReserveWait, tried again (every
// 20 ms, backing off to 500 ms, on the configured clock) until they
// settle or ReserveWait passes: the day then ends at the limit instead of
// below it by what the holds exceeded the calls' real cost. Every settlement and
// Record updates the global rows, one at a time: the cost of that, and of
// a reservation, is measured by BenchmarkReserve.
//
// # Alerts
//
// A threshold is reported by the transaction that passes it, which also
// advances the row's alerts count: the Observer hears it once, on the
// replica that passed it, after the commit (a process that dies between
// the two loses the alert; it is never repeated). A threshold passed by
// the charge of expired holds is reported by the Check whose sweep
// charged them, the same way: the rows it charged are locked in a
// transaction of their own that advances their alerts count, so of
// replicas sweeping at once one reports it (a process that dies between
// the sweep and that transaction leaves it to the next Record or
// settlement of the row).
//
// # A database that is down
//
// Check and Reserve fail closed: a run is refused with an error wrapping
// ErrUnavailable (its Response is agent.DefaultRefusalReason). With
// Config.UsersWhenDown LocalWhenDown the users' own messages are checked
// instead against an in-memory agent.SpendLimits with the same limits,
// counting this process's spend meanwhile — never without a limit;
// triggered runs are still refused. A tenant ID the tables cannot hold
// (empty, longer than agent.MaxIDLen, not UTF-8, a NUL byte) is refused
// with ErrInvalid before anything is sent to PostgreSQL.
package pgspend
