package agent

import (
	"cmp"
	"fmt"
	"time"
)

// CheckBudget reports whether a run with Budget b (as Message.Budget)
// could start on this orchestrator: b is valid (else ErrInvalidBudget);
// when b, or LoopConfig.Budget for the limits b leaves at zero, sets a
// cost limit, the orchestrator's model has a price in Config.Prices (else
// ErrNoPrice); and a token limit leaves room for the smallest model call
// the orchestrator makes: its system prompt and the tool specs it sends,
// as estimated (characters / 4, or Config.CountTokens), plus the 64
// output tokens a call needs (else an error wrapping ErrInvalidConfig and
// ErrInvalidBudget that names the least workable MaxTokens). The check is
// on estimates: a run may still end early when the model counts far more
// tokens than estimated, or the history and the message are long.
// trigger/agentexec calls it when a task is created, so a task whose
// budget can never run is refused then, not at its first run;
// HandleMessage refuses such a Message.Budget the same way, before any
// model call.
func (o *Orchestrator) CheckBudget(b Budget) error {
	_, err := o.runBudget(b, nil)
	return err
}

// runBudget returns the Budget of a run whose message has b (and the time
// zone loc, nil for the default): each limit b leaves at zero takes
// LoopConfig.Budget's (a message setting only MaxToolCalls keeps the
// default cost limit). A cost limit needs the model's price, a token
// limit room for the smallest call (leastTokens).
func (o *Orchestrator) runBudget(b Budget, loc *time.Location) (Budget, error) {
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
	if b.MaxTokens > 0 {
		if err := o.checkTokens(b.MaxTokens, loc); err != nil {
			return b, err
		}
	}
	return b, nil
}

// checkTokens refuses a token limit smaller than the smallest model call
// of a run (leastTokens), saying the least workable value.
func (o *Orchestrator) checkTokens(maxTokens int, loc *time.Location) error {
	sys, least := o.leastTokens(loc)
	if maxTokens >= least {
		return nil
	}
	return fmt.Errorf("%w: %w: MaxTokens %d cannot fit a model call: the system prompt (about %d tokens) and the tool specs (about %d) "+
		"are sent with every call, and a call needs %d output tokens; the least workable MaxTokens is %d",
		ErrInvalidConfig, ErrInvalidBudget, maxTokens, sys, o.specTokens, budgetReserveTokens, least)
}

// leastTokens returns the estimated tokens of the system prompt (in time
// zone loc, without recalled items) and the smallest token limit a run can
// work with: that prompt, the tool specs, and budgetReserveTokens of
// output.
func (o *Orchestrator) leastTokens(loc *time.Location) (sys, least int) {
	_, sys = o.systemPrompt(Message{Location: loc})
	return sys, sys + o.specTokens + budgetReserveTokens
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
// a SpendGuard whose LimitsUSD method reports dollar limits (SpendLimits,
// agent/pgspend: every run would be priced at $0 and no limit ever
// reached).
func (o *Orchestrator) checkCostLimits() error {
	if o.priced {
		return nil
	}
	if o.loop.Budget.MaxCostUSD > 0 {
		return fmt.Errorf("%w: LoopConfig.Budget.MaxCostUSD is set: %w", ErrInvalidConfig, o.noPrice())
	}
	if g, ok := o.guard.(interface{ LimitsUSD() bool }); ok && g.LimitsUSD() {
		return fmt.Errorf("%w: SpendGuard %T has dollar limits: %w", ErrInvalidConfig, o.guard, o.noPrice())
	}
	return nil
}

// LimitsUSD reports whether s sets any dollar limit: then the
// orchestrator needs its model's price (NewOrchestrator refuses a guard
// with a LimitsUSD method reporting true on a model without one, whose
// runs would all cost $0).
func (s *SpendLimits) LimitsUSD() bool {
	if s == nil {
		return false
	}
	return s.cfg.LimitsUSD()
}

// LimitsUSD reports whether c sets any dollar limit.
func (c SpendLimitsConfig) LimitsUSD() bool {
	set := func(l Limits) bool { return l.DailyUSD > 0 || l.MonthlyUSD > 0 }
	if set(c.Tenant) || set(c.Global) {
		return true
	}
	for _, l := range c.PerTenant {
		if set(l) {
			return true
		}
	}
	return false
}
