package agent

import (
	"cmp"
	"fmt"
)

// CheckBudget reports whether a run with Budget b (as Message.Budget)
// could start on this orchestrator: b is valid (else ErrInvalidBudget),
// and when b, or LoopConfig.Budget for the limits b leaves at zero, sets
// a cost limit, the orchestrator's model has a price in Config.Prices
// (else ErrNoPrice). trigger/agentexec calls it when a task is created,
// so a task whose budget can never run is refused then, not at its first
// run.
func (o *Orchestrator) CheckBudget(b Budget) error {
	_, err := o.runBudget(b)
	return err
}

// runBudget returns the Budget of a run whose message has b: each limit b
// leaves at zero takes LoopConfig.Budget's (a message setting only
// MaxToolCalls keeps the default cost limit). A cost limit needs the
// model's price.
func (o *Orchestrator) runBudget(b Budget) (Budget, error) {
	if err := b.Check(); err != nil {
		return b, err
	}
	d := o.loop.Budget
	b.MaxTokens = cmp.Or(b.MaxTokens, d.MaxTokens)
	b.MaxCostUSD = cmp.Or(b.MaxCostUSD, d.MaxCostUSD)
	b.MaxWall = cmp.Or(b.MaxWall, d.MaxWall)
	b.MaxToolCalls = cmp.Or(b.MaxToolCalls, d.MaxToolCalls)
	if b.MaxCostUSD > 0 && !o.priced {
		return b, o.noPrice()
	}
	return b, nil
}

// noPrice says why the orchestrator's model has no price (ErrNoPrice).
func (o *Orchestrator) noPrice() error {
	if o.model == "" {
		return fmt.Errorf("%w: the model client does not name its model (a Model() string method), so its price is unknown", ErrNoPrice)
	}
	return fmt.Errorf("%w: model %q is not in Config.Prices", ErrNoPrice, o.model)
}

// checkCostLimits refuses, when the orchestrator is built, cost limits
// that could never be enforced because the model has no price: a
// LoopConfig.Budget.MaxCostUSD (every run would fail with ErrNoPrice), or
// a SpendLimits with dollar limits (every run would be priced at $0 and
// no limit ever reached).
func (o *Orchestrator) checkCostLimits() error {
	if o.priced {
		return nil
	}
	if o.loop.Budget.MaxCostUSD > 0 {
		return fmt.Errorf("%w: LoopConfig.Budget.MaxCostUSD is set: %w", ErrInvalidConfig, o.noPrice())
	}
	if sl, ok := o.guard.(*SpendLimits); ok && sl.limitsUSD() {
		return fmt.Errorf("%w: SpendGuard is a SpendLimits with dollar limits: %w", ErrInvalidConfig, o.noPrice())
	}
	return nil
}

// limitsUSD reports whether s sets any dollar limit.
func (s *SpendLimits) limitsUSD() bool {
	if s == nil {
		return false
	}
	set := func(l Limits) bool { return l.DailyUSD > 0 || l.MonthlyUSD > 0 }
	if set(s.cfg.Tenant) || set(s.cfg.Global) {
		return true
	}
	for _, l := range s.cfg.PerTenant {
		if set(l) {
			return true
		}
	}
	return false
}
