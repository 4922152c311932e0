package pgspend

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/ids"
)

// ErrInvalid: a Config or a tenant ID the guard cannot use (a tenant ID
// empty, longer than agent.MaxIDLen, not UTF-8 or holding a NUL byte).
// Nothing was sent to PostgreSQL.
var ErrInvalid = errors.New("pgspend: invalid")

// ErrUnavailable wraps the error of a guard that could not reach its
// tables: the run is refused (see Config.UsersWhenDown).
var ErrUnavailable = errors.New("pgspend: the spend ledger is unavailable")

// WhenDown says what a user's own message gets while PostgreSQL cannot
// be reached. Triggered runs are always refused then.
type WhenDown int

const (
	// RefuseWhenDown refuses every run (fail closed): the default.
	RefuseWhenDown WhenDown = iota
	// LocalWhenDown checks the users' own messages (Source
	// agent.SourceUser) against an in-memory agent.SpendLimits with the
	// same limits, counting what this process spends while the database
	// is unreachable (from zero: each replica may spend up to the limits
	// meanwhile, never without a limit).
	LocalWhenDown
)

// Config configures a Guard. Its embedded agent.SpendLimitsConfig is the
// limits, alerts, action, time zone and clock, as for agent.SpendLimits.
type Config struct {
	agent.SpendLimitsConfig
	// Schema is where the tables live; "" is the connection's search_path.
	Schema string
	// UsersWhenDown: see WhenDown. Default RefuseWhenDown.
	UsersWhenDown WhenDown
}

// Guard is an agent.SpendGuard and agent.SpendReserver on PostgreSQL:
// guards on the same tables (replicas) share every tenant's spend, which
// survives restarts. Safe for concurrent use.
type Guard struct {
	db      *pgxpool.Pool
	cfg     agent.SpendLimitsConfig
	alerts  []float64 // the thresholds, ascending, ending with 1
	down    WhenDown
	local   *agent.SpendLimits // for LocalWhenDown
	spend   string             // quoted table names
	holds   string
	lockKey int64
	q       queries
}

var _ agent.SpendReserver = (*Guard)(nil)

// New returns a Guard on db, a pool the caller configured and closes. A
// nil db, a Config agent.NewSpendLimits refuses, or a Schema PostgreSQL
// cannot name is an error wrapping ErrInvalid. It sends nothing to
// PostgreSQL: call Migrate once before the first use.
func New(db *pgxpool.Pool, cfg Config) (*Guard, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: New needs a *pgxpool.Pool, got nil", ErrInvalid)
	}
	if cfg.UsersWhenDown < RefuseWhenDown || cfg.UsersWhenDown > LocalWhenDown {
		return nil, fmt.Errorf("%w: UsersWhenDown %d", ErrInvalid, cfg.UsersWhenDown)
	}
	if len(cfg.Schema) > 63 || strings.IndexByte(cfg.Schema, 0) >= 0 || !utf8.ValidString(cfg.Schema) {
		return nil, fmt.Errorf("%w: schema %q cannot be a PostgreSQL name", ErrInvalid, cfg.Schema)
	}
	lc := cfg.SpendLimitsConfig
	local, err := agent.NewSpendLimits(lc) // checks lc
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if lc.Alerts == nil {
		lc.Alerts = []float64{0.5, 0.8, 0.9}
	}
	alerts := append(slices.Sorted(slices.Values(lc.Alerts)), 1)
	if lc.Location == nil {
		lc.Location = time.UTC
	}
	lc.Clock = clock.Or(lc.Clock)
	if lc.ReserveTTL == 0 {
		lc.ReserveTTL = agent.DefaultReserveTTL
	}
	ident := func(name string) string {
		if cfg.Schema == "" {
			return pgx.Identifier{name}.Sanitize()
		}
		return pgx.Identifier{cfg.Schema, name}.Sanitize()
	}
	g := &Guard{db: db, cfg: lc, alerts: alerts, down: cfg.UsersWhenDown, spend: ident("valet_spend"), holds: ident("valet_spend_holds")}
	if g.down == LocalWhenDown {
		g.local = local
	}
	h := fnv.New64a()
	h.Write([]byte("valet/agent/pgspend migrate\x00" + g.spend + "\x00" + g.holds))
	g.lockKey = int64(h.Sum64())
	g.q = newQueries(g.spend, g.holds)
	return g, nil
}

type queries struct {
	migrate                []string
	lockTenant             string
	totals, reserve        string
	deleteHold, sweep, add string
	setAlerts, spentOf     string
	lockAlerts             string
}

func newQueries(spend, holds string) queries {
	idx := func(name string) string { return pgx.Identifier{name}.Sanitize() }
	// A row per spender (tenant_id; '' is all tenants), period and key.
	lock := `INSERT INTO ` + spend + ` (tenant_id, period, key) VALUES ($1, 'day', $2), ($1, 'month', $3)
		ON CONFLICT (tenant_id, period, key) DO UPDATE SET spent_usd = ` + spend + `.spent_usd`
	sum := func(where string) string {
		return `coalesce((SELECT sum(usd) FROM ` + holds + ` WHERE ` + where + ` AND expires_at > $4), 0)`
	}
	spent := func(tenant, period, key string) string {
		return `coalesce((SELECT spent_usd FROM ` + spend + ` WHERE tenant_id = ` + tenant + ` AND period = '` + period + `' AND key = ` + key + `), 0)`
	}
	return queries{
		migrate: []string{
			`CREATE TABLE IF NOT EXISTS ` + spend + ` (
				tenant_id text NOT NULL,
				period text NOT NULL,
				key text NOT NULL,
				spent_usd double precision NOT NULL DEFAULT 0,
				alerts integer NOT NULL DEFAULT 0,
				PRIMARY KEY (tenant_id, period, key))`,
			`CREATE TABLE IF NOT EXISTS ` + holds + ` (
				id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
				tenant_id text NOT NULL,
				day text NOT NULL,
				month text NOT NULL,
				usd double precision NOT NULL,
				expires_at timestamptz NOT NULL)`,
			`CREATE INDEX IF NOT EXISTS ` + idx("valet_spend_holds_month_idx") + ` ON ` + holds + ` (month, tenant_id)`,
			`CREATE INDEX IF NOT EXISTS ` + idx("valet_spend_holds_expiry_idx") + ` ON ` + holds + ` (expires_at)`,
		},
		lockTenant: lock,
		totals: `SELECT ` +
			spent("$1", "day", "$2") + ` + ` + sum("tenant_id = $1 AND day = $2") + `, ` +
			spent("$1", "month", "$3") + ` + ` + sum("tenant_id = $1 AND month = $3") + `, ` +
			spent("''", "day", "$2") + ` + ` + sum("month = $3 AND day = $2") + `, ` +
			spent("''", "month", "$3") + ` + ` + sum("month = $3"),
		reserve: `WITH s AS (SELECT ` +
			spent("$1", "day", "$2") + ` AS std, ` + sum("tenant_id = $1 AND day = $2") + ` AS htd, ` +
			spent("$1", "month", "$3") + ` AS stm, ` + sum("tenant_id = $1 AND month = $3") + ` AS htm, ` +
			spent("''", "day", "$2") + ` AS sgd, ` + sum("month = $3 AND day = $2") + ` AS hgd, ` +
			spent("''", "month", "$3") + ` AS sgm, ` + sum("month = $3") + ` AS hgm),
			t AS (SELECT std + htd AS td, stm + htm AS tm, sgd + hgd AS gd, sgm + hgm AS gm, std, stm, sgd, sgm FROM s),
			ins AS (INSERT INTO ` + holds + ` (tenant_id, day, month, usd, expires_at)
				SELECT $1, $2, $3, $5, $6 FROM t WHERE NOT (
					($7::bigint > 0 AND round(td::numeric * 1000000) >= $7) OR ($8::bigint > 0 AND round(tm::numeric * 1000000) >= $8) OR
					($9::bigint > 0 AND round(gd::numeric * 1000000) >= $9) OR ($10::bigint > 0 AND round(gm::numeric * 1000000) >= $10))
				RETURNING id)
			SELECT td, tm, gd, gm, std, stm, sgd, sgm, (SELECT id FROM ins) FROM t`,
		deleteHold: `DELETE FROM ` + holds + ` WHERE id = $1`,
		// An expired hold (its settlement never came: a process died,
		// or the database failed the settlement and Record both) is
		// charged at its reserved amount, in its own day and month.
		sweep: `WITH gone AS (DELETE FROM ` + holds + ` WHERE expires_at <= $1 RETURNING tenant_id, day, month, usd),
			c AS (SELECT tenant_id AS who, 'day'::text AS period, day AS key, usd FROM gone
				UNION ALL SELECT tenant_id, 'month', month, usd FROM gone
				UNION ALL SELECT '', 'day', day, usd FROM gone
				UNION ALL SELECT '', 'month', month, usd FROM gone)
			INSERT INTO ` + spend + ` (tenant_id, period, key, spent_usd)
			SELECT who, period, key, sum(usd) FROM c GROUP BY who, period, key ORDER BY who DESC, period, key
			ON CONFLICT (tenant_id, period, key) DO UPDATE SET spent_usd = ` + spend + `.spent_usd + excluded.spent_usd
			RETURNING tenant_id, period, key`,
		lockAlerts: `SELECT spent_usd, alerts FROM ` + spend + ` WHERE tenant_id = $1 AND period = $2 AND key = $3 FOR UPDATE`,
		add: `INSERT INTO ` + spend + ` (tenant_id, period, key, spent_usd) VALUES ($1, 'day', $2, $4), ($1, 'month', $3, $4)
			ON CONFLICT (tenant_id, period, key) DO UPDATE SET spent_usd = ` + spend + `.spent_usd + excluded.spent_usd
			RETURNING period, key, spent_usd, alerts`,
		setAlerts: `UPDATE ` + spend + ` SET alerts = $4 WHERE tenant_id = $1 AND period = $2 AND key = $3`,
		spentOf:   `SELECT ` + spent("$1", "day", "$2") + `, ` + spent("$1", "month", "$3"),
	}
}

// Migrate creates the tables if they do not exist (the schema must),
// under an advisory lock so processes starting together do not race.
func (g *Guard) Migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, g.lockKey); err != nil {
			return err
		}
		for _, q := range g.q.migrate {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("pgspend: migrate: %w", err)
			}
		}
		return nil
	})
}

func checkTenant(tenantID string) error {
	if tenantID == "" || !ids.Valid(tenantID) {
		return fmt.Errorf("%w: tenant ID %q: empty, longer than %d bytes, not UTF-8 or holding a NUL byte",
			ErrInvalid, strings.ToValidUTF8(strings.ReplaceAll(truncate(tenantID), "\x00", `\x00`), "?"), agent.MaxIDLen)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// period returns the day and month keys of now in the guard's time zone.
func (g *Guard) period(now time.Time) (day, month string) {
	t := now.In(g.cfg.Location)
	return t.Format("2006-01-02"), t.Format("2006-01")
}

// unavailable wraps a database error, or returns ctx's error when the
// caller left.
func unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// localFor returns the in-memory guard a run ctx describes may fall back
// on while PostgreSQL is unreachable: a user's own message with
// LocalWhenDown; nil otherwise.
func (g *Guard) localFor(ctx context.Context) *agent.SpendLimits {
	if g.local == nil || ctx.Err() != nil {
		return nil
	}
	if ri, ok := agent.RunInfoFrom(ctx); ok && ri.Source != agent.SourceUser && ri.Source != "" {
		return nil
	}
	return g.local
}

// Check refuses a run as agent.SpendLimits does, from the spend of every
// replica and the reservations they hold. A database it cannot reach
// refuses the run with ErrUnavailable (see Config.UsersWhenDown). It also
// drops the reservations whose TTL ran out.
func (g *Guard) Check(ctx context.Context, tenantID string) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	now := g.cfg.Clock.Now()
	if err := g.sweep(ctx, now); err != nil {
		if l := g.localFor(ctx); l != nil {
			return l.Check(ctx, tenantID)
		}
		return unavailable(ctx, err)
	}
	if !g.cfg.Enforced(ctx) {
		return nil
	}
	t, err := g.totals(ctx, g.db, tenantID, now)
	if err != nil {
		if l := g.localFor(ctx); l != nil {
			return l.Check(ctx, tenantID)
		}
		return unavailable(ctx, err)
	}
	return g.cfg.Refusal(tenantID, t)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (g *Guard) totals(ctx context.Context, q querier, tenantID string, now time.Time) (agent.SpendTotals, error) {
	day, month := g.period(now)
	var t agent.SpendTotals
	err := q.QueryRow(ctx, g.q.totals, tenantID, day, month, now).Scan(&t.TenantDay, &t.TenantMonth, &t.GlobalDay, &t.GlobalMonth)
	return t, err
}

// Record adds a run's cost to the tenant's and the global totals, and
// tells the Observer of each threshold passed: once, whichever replica
// passed it (an alert whose process dies between its commit and the
// Observer is lost, never repeated).
func (g *Guard) Record(ctx context.Context, tenantID string, c agent.Consumed) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	if c.CostUSD < 0 || c.CostUSD != c.CostUSD || c.CostUSD > 1e15 {
		return fmt.Errorf("%w: spend of %v USD is not a cost", ErrInvalid, c.CostUSD)
	}
	if c.CostUSD == 0 {
		return nil // nothing to count (every call settled its reservation)
	}
	day, month := g.period(g.cfg.Clock.Now())
	err := g.add(ctx, tenantID, c.CostUSD, hold{}, day, month)
	if err != nil {
		if l := g.local; l != nil {
			_ = l.Record(ctx, tenantID, c) // counted here meanwhile
		}
		return unavailable(ctx, err)
	}
	return nil
}

// hold is a reservation a settlement ends: its row and amount.
type hold struct {
	id  int64 // 0: none
	usd float64
}

// add counts cost in the day and month given (a reservation's own) in
// one transaction, ending hold h, and delivers the alerts it passed after
// the commit. A hold already swept (expired) was charged its reserved
// amount then: only what cost adds to it is counted.
func (g *Guard) add(ctx context.Context, tenantID string, cost float64, h hold, day, month string) error {
	var out []agent.SpendAlert
	err := pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		out = out[:0]
		cost := cost
		if h.id != 0 {
			tag, err := tx.Exec(ctx, g.q.deleteHold, h.id)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 { // swept: charged h.usd already
				cost = max(0, cost-h.usd)
			}
		}
		// The hold's end and both additions in one round trip.
		type row struct {
			who, period, key string
			spent            float64
			alerts           int
		}
		var rs []row
		b := &pgx.Batch{}
		for _, who := range []string{tenantID, ""} {
			b.Queue(g.q.add, who, day, month, cost).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					r := row{who: who}
					if err := rows.Scan(&r.period, &r.key, &r.spent, &r.alerts); err != nil {
						return err
					}
					rs = append(rs, r)
				}
				return rows.Err()
			})
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		for _, r := range rs {
			var err error
			if out, err = g.passed(ctx, tx, out, r.who, r.period, r.key, r.spent, r.alerts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	g.tell(out)
	return nil
}

// micro returns usd in micro-dollars, 0 for no limit.
func micro(usd float64) int64 {
	if usd <= 0 {
		return 0
	}
	return int64(math.Round(usd * 1e6))
}

// reached reports whether spent has reached limit, to the micro-dollar,
// as agent.SpendLimits counts.
func reached(spent, limit float64) bool {
	return limit > 0 && int64(spent*1e6+0.5) >= int64(limit*1e6+0.5)
}

// Reserve holds maxUSD for a model call of tenantID, refusing as Check
// does when what every replica spent and holds for the tenant or all
// tenants has reached a limit. It locks the tenant's rows (and the
// global ones when a global limit is set) while it decides, so replicas
// reserving at once are counted one after the other: a limit is passed
// by at most one reservation. The hold counts until settled; one still
// unsettled when ReserveTTL passes (its process died, or a database blip
// failed its settlement) is charged at maxUSD by the next Check. Settling
// deletes the hold and counts the call's cost in one transaction, once,
// in the day and month of the reservation.
func (g *Guard) Reserve(ctx context.Context, tenantID string, maxUSD float64) (agent.SettleSpend, error) {
	if err := checkTenant(tenantID); err != nil {
		return nil, err
	}
	if maxUSD < 0 || maxUSD != maxUSD || maxUSD > 1e15 {
		return nil, fmt.Errorf("%w: reservation of %v USD is not a cost", ErrInvalid, maxUSD)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	enforced := g.cfg.Enforced(ctx)
	global := g.cfg.Global.DailyUSD > 0 || g.cfg.Global.MonthlyUSD > 0
	var wait clock.Timer // ReserveWait, from the first refusal
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	poll := reservePoll
	for {
		id, day, month, refusal, heldOnly, err := g.reserveOnce(ctx, tenantID, maxUSD, enforced, global)
		if err != nil {
			if l := g.localFor(ctx); l != nil {
				return l.Reserve(ctx, tenantID, maxUSD)
			}
			return nil, unavailable(ctx, err)
		}
		if refusal == nil {
			return g.settler(tenantID, hold{id: id, usd: maxUSD}, day, month), nil
		}
		if g.cfg.ReserveWait <= 0 || !heldOnly {
			return nil, refusal
		}
		// Reached only with calls in flight: poll until one settles.
		if wait == nil {
			wait = g.cfg.Clock.NewTimer(g.cfg.ReserveWait)
		}
		tick := g.cfg.Clock.NewTimer(poll)
		select {
		case <-tick.C():
			poll = min(2*poll, reservePollMax)
		case <-wait.C():
			tick.Stop()
			return nil, refusal
		case <-ctx.Done():
			tick.Stop()
			return nil, ctx.Err()
		}
	}
}

// reservePoll and reservePollMax bound the wait between two tries of a
// Reserve waiting for calls in flight (Config.ReserveWait).
const (
	reservePoll    = 20 * time.Millisecond
	reservePollMax = 500 * time.Millisecond
)

// reserveOnce tries to hold maxUSD: the hold's id, or the refusal and
// whether the holds of calls in flight alone cause it.
func (g *Guard) reserveOnce(ctx context.Context, tenantID string, maxUSD float64, enforced, global bool) (id int64, day, month string, refusal error, heldOnly bool, err error) {
	now := g.cfg.Clock.Now()
	day, month = g.period(now)
	// One round trip, one implicit transaction: lock the tenant's rows
	// (and all tenants' with a global limit), then add up what is spent
	// and held — a statement of its own, so it sees every hold committed
	// by whoever held the locks before — and insert the hold unless a
	// limit is reached.
	var lim [4]int64 // in micro-dollars; 0: none, or not enforced
	b := &pgx.Batch{}
	locks := 0
	if enforced {
		tl := g.cfg.LimitsOf(tenantID)
		lim = [4]int64{micro(tl.DailyUSD), micro(tl.MonthlyUSD), micro(g.cfg.Global.DailyUSD), micro(g.cfg.Global.MonthlyUSD)}
		b.Queue(g.q.lockTenant, tenantID, day, month)
		locks++
		if global {
			b.Queue(g.q.lockTenant, "", day, month) // all tenants'
			locks++
		}
	}
	b.Queue(g.q.reserve, tenantID, day, month, now, maxUSD, now.Add(g.cfg.ReserveTTL), lim[0], lim[1], lim[2], lim[3])
	var t, spent agent.SpendTotals
	var held *int64
	err = func() error {
		br := g.db.SendBatch(ctx, b)
		for range locks {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		if err := br.QueryRow().Scan(&t.TenantDay, &t.TenantMonth, &t.GlobalDay, &t.GlobalMonth,
			&spent.TenantDay, &spent.TenantMonth, &spent.GlobalDay, &spent.GlobalMonth, &held); err != nil {
			br.Close()
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return 0, "", "", nil, false, err
	}
	if held != nil {
		return *held, day, month, nil, false, nil
	}
	heldOnly = spent != t && g.cfg.Refusal(tenantID, spent) == nil
	if refusal = g.cfg.Refusal(tenantID, t); refusal == nil {
		// A total a rounding tie away from a limit: refused all the same.
		refusal = &agent.RefusalError{Reason: agent.DefaultRefusalReason, Err: fmt.Errorf("%w: tenant %s is at a spending limit", agent.ErrSpendLimit, tenantID)}
	}
	return 0, day, month, refusal, heldOnly, nil
}

// settler returns the settlement of hold h, counted in the day and month
// it was reserved in.
func (g *Guard) settler(tenantID string, h hold, day, month string) agent.SettleSpend {
	var mu sync.Mutex
	var done bool
	return func(ctx context.Context, cost float64) error {
		if cost < 0 || cost != cost || cost > 1e15 {
			return fmt.Errorf("%w: spend of %v USD is not a cost", ErrInvalid, cost)
		}
		mu.Lock()
		defer mu.Unlock()
		if done {
			return nil
		}
		if err := g.add(ctx, tenantID, cost, h, day, month); err != nil {
			return unavailable(ctx, err)
		}
		done = true
		return nil
	}
}

// LimitsUSD reports whether the guard sets any dollar limit: then
// agent.NewOrchestrator refuses a model without a price, whose calls would
// all cost $0.
func (g *Guard) LimitsUSD() bool { return g.cfg.LimitsUSD() }

// Spent returns what the tenant ("" for all tenants) spent today and this
// month, as counted by every replica (reservations not settled are not
// included).
func (g *Guard) Spent(ctx context.Context, tenantID string) (day, month float64, err error) {
	if tenantID != "" {
		if err := checkTenant(tenantID); err != nil {
			return 0, 0, err
		}
	}
	d, m := g.period(g.cfg.Clock.Now())
	if err := g.db.QueryRow(ctx, g.q.spentOf, tenantID, d, m).Scan(&day, &month); err != nil {
		return 0, 0, unavailable(ctx, err)
	}
	return day, month, nil
}
