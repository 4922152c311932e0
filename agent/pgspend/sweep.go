package pgspend

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/valetkit/valet/agent"
)

// swept is a spend row an expiry sweep charged.
type swept struct{ who, period, key string }

// sweep charges the holds expired by now at their reserved amounts and,
// when that charged anything, delivers the alerts the charges passed,
// once across replicas as add does: the rows charged are locked in one
// transaction, their alerts counter moved on, and the Observer told
// after the commit.
func (g *Guard) sweep(ctx context.Context, now time.Time) error {
	rows, err := g.db.Query(ctx, g.q.sweep, now)
	if err != nil {
		return err
	}
	charged, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (swept, error) {
		var s swept
		err := row.Scan(&s.who, &s.period, &s.key)
		return s, err
	})
	if err != nil || len(charged) == 0 {
		return err
	}
	// In the order add and the sweep lock them (a tenant's rows before
	// all tenants'), so two transactions never wait on each other.
	slices.SortFunc(charged, func(a, b swept) int {
		return cmp.Or(-cmp.Compare(a.who, b.who), cmp.Compare(a.period, b.period), cmp.Compare(a.key, b.key))
	})
	var out []agent.SpendAlert
	err = pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		out = out[:0]
		for _, c := range charged {
			var spent float64
			var alerts int
			if err := tx.QueryRow(ctx, g.q.lockAlerts, c.who, c.period, c.key).Scan(&spent, &alerts); err != nil {
				return err
			}
			var err error
			if out, err = g.passed(ctx, tx, out, c.who, c.period, c.key, spent, alerts); err != nil {
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

// passed appends to out the alerts spent passes on row (who, period,
// key) whose counter is at alerts, and moves the counter on in tx.
func (g *Guard) passed(ctx context.Context, tx pgx.Tx, out []agent.SpendAlert, who, period, key string, spent float64, alerts int) ([]agent.SpendAlert, error) {
	lim := g.cfg.Global
	if who != "" {
		lim = g.cfg.LimitsOf(who)
	}
	limit := lim.DailyUSD
	if period == "month" {
		limit = lim.MonthlyUSD
	}
	n := alerts
	for limit > 0 && n < len(g.alerts) && reached(spent, g.alerts[n]*limit) {
		out = append(out, agent.SpendAlert{TenantID: who, Period: period, Key: key, SpentUSD: spent, LimitUSD: limit, Threshold: g.alerts[n]})
		n++
	}
	if n != alerts {
		if _, err := tx.Exec(ctx, g.q.setAlerts, who, period, key, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// tell delivers alerts to the Observer.
func (g *Guard) tell(alerts []agent.SpendAlert) {
	if g.cfg.Observer != nil {
		for _, a := range alerts {
			g.cfg.Observer(a)
		}
	}
}
