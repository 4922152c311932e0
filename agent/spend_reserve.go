package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/llm"
)

// SpendReserver is a SpendGuard that reserves budget for each model call
// (SpendLimits and agent/pgspend's guard are). When Config.SpendGuard is
// one, every model call of a run its Check allowed first reserves what
// the call may cost at most — its input tokens as estimated and its
// MaxTokens of output (capped by the run's Budget, else at
// ReserveOutputTokens), at the model's price (with a client that may
// switch models, such as llm.Fallback, whose Models() names them: the
// dearest price among them) — and settles it after the
// call with the call's real cost (0 when the call failed). So runs in
// flight cannot overshoot a limit together: each call is counted before
// it is made, and a limit is exceeded by at most one call's reservation
// (plus what a model counts beyond the input's estimate).
//
// Reserve refuses like Check (a *RefusalError, or any error: a guard that
// fails refuses): the run stops before the call, with Status
// StatusRefused, the refusal's Reason as Response and an error wrapping
// ErrSpendRefused, keeping what it consumed. A reservation never settled
// (its process died) stops counting after a time the guard sets
// (SpendLimitsConfig.ReserveTTL). Holds make a guard refuse early: a
// call is refused while calls in flight hold the rest of the limit,
// though their real cost may leave room; SpendLimitsConfig.ReserveWait
// makes it wait for them instead. What settled reservations counted is
// not counted again by Record, which then receives the rest of the run's
// Consumed (CostUSD 0 when every call was settled). RunInfoFrom(ctx)
// tells Reserve about the run. A sub-agent's calls are reserved and
// settled like its parent run's, and not counted again by its Record. So
// is the model call of a run's background fact extraction
// (MemoryOptions.Extract), after its Check: refused, the extraction is
// skipped; its Record gets the call's tokens (and its cost only when the
// settlement failed).
type SpendReserver interface {
	SpendGuard
	Reserve(ctx context.Context, tenantID string, maxUSD float64) (SettleSpend, error)
}

// SettleSpend ends a reservation with the real cost of its call, which
// the guard counts in place of the reservation. Only the first call
// counts. An error means the cost was not counted (Record then counts it).
type SettleSpend func(ctx context.Context, costUSD float64) error

// ReserveOutputTokens is the output a model call is reserved for (and
// capped at, as its llm.Request.MaxTokens) when a SpendReserver guards
// the run and nothing else caps the call.
const ReserveOutputTokens = 4096

// reserveCall reserves req's largest cost with the run's SpendReserver,
// capping req.MaxTokens at ReserveOutputTokens when unset.
func (r *run) reserveCall(req *llm.Request) (SettleSpend, error) {
	if req.MaxTokens <= 0 {
		req.MaxTokens = ReserveOutputTokens
	}
	input := r.windowTokens(req.Messages)
	if len(req.Tools) > 0 {
		input += toolTokens(r.o, req.Tools)
	}
	if m := r.meter; m != nil {
		input = m.plan(input)
	}
	// The model the run's client (a router's choice, say) names, else the
	// request's, else the orchestrator's; and, with a cost budget, no less
	// than the dearest price the run met (a fallback's).
	price := r.o.dearestPrice(r.client(), r.o.priceOf(req.Model, r.model()))
	if m := r.meter; m != nil {
		price.InputPerMillion = max(price.InputPerMillion, m.price.InputPerMillion)
		price.OutputPerMillion = max(price.OutputPerMillion, m.price.OutputPerMillion)
	}
	maxUSD := price.Cost(llm.Usage{InputTokens: input, OutputTokens: req.MaxTokens})
	ctx := context.WithValue(r.ctx, runInfoKey{}, r.info())
	settle, err := r.reserver.Reserve(ctx, r.msg.TenantID, maxUSD)
	if err == nil && settle == nil {
		err = errors.New("agent: the spend guard's Reserve returned no settle function")
	}
	if err != nil {
		if r.ctx.Err() != nil {
			return nil, err // the caller left: cancelled, not refused
		}
		r.res.Status, r.res.Response = StatusRefused, DefaultRefusalReason
		if re := (*RefusalError)(nil); errors.As(err, &re) && strings.TrimSpace(re.Reason) != "" {
			r.res.Response = re.Reason
		}
		err = fmt.Errorf("%w: %w", ErrSpendRefused, err)
		if r.o.obs != nil {
			r.step(Step{Kind: StepSpendRefused, Text: r.res.Response, Err: err})
		}
		return nil, err
	}
	return settle, nil
}

// dearestPrice returns price, or, for a client that may switch models
// (llm.Fallback, whose Models() names them), the dearest of price and
// theirs: any of them may answer a call, which is reserved at it.
func (o *Orchestrator) dearestPrice(c llm.Client, price Price) Price {
	ms, ok := c.(interface{ Models() []string })
	if !ok {
		return price
	}
	for _, name := range ms.Models() {
		if p, ok := o.prices.Lookup(name); ok {
			price.InputPerMillion = max(price.InputPerMillion, p.InputPerMillion)
			price.OutputPerMillion = max(price.OutputPerMillion, p.OutputPerMillion)
		}
	}
	return price
}

// settleCall settles a call's reservation with its cost.
func (r *run) settleCall(settle SettleSpend, cost float64) {
	ctx := context.WithValue(context.WithoutCancel(r.ctx), runInfoKey{}, r.info())
	ctx, cancel := context.WithTimeout(ctx, spendRecordTimeout)
	defer cancel()
	if err := settle(ctx, cost); err != nil {
		r.log().ErrorContext(r.ctx, "agent: settling a model call's spend reservation failed", "source", r.msg.Source, "task_id", r.msg.TaskID, "cost_usd", cost, "err", err)
		return
	}
	r.settledUSD += cost
}

// spendHold is a reservation SpendLimits holds.
type spendHold struct {
	tenant     string
	usd        float64
	day, month string
	expires    time.Time
}

// period returns the day and the month of t in the guard's time zone.
func (s *SpendLimits) period(t time.Time) (day, month string) {
	t = t.In(s.cfg.Location)
	return t.Format("2006-01-02"), t.Format("2006-01")
}

// totals returns what tenantID and all tenants spent and hold in the day
// and month, dropping the holds expired at now. s.mu is held.
func (s *SpendLimits) totals(tenantID, day, month string, now time.Time) SpendTotals {
	s.global.roll(day, month)
	t := SpendTotals{GlobalDay: s.global.dayUSD, GlobalMonth: s.global.monthUSD}
	if st := s.tenants[tenantID]; st != nil {
		st.roll(day, month)
		t.TenantDay, t.TenantMonth = st.dayUSD, st.monthUSD
	}
	for id, h := range s.holds {
		if !now.Before(h.expires) {
			delete(s.holds, id)
			s.unhold(h)
			continue
		}
		if h.day == day {
			t.GlobalDay += h.usd
		}
		if h.month == month {
			t.GlobalMonth += h.usd
		}
		if h.tenant != tenantID {
			continue
		}
		if h.day == day {
			t.TenantDay += h.usd
		}
		if h.month == month {
			t.TenantMonth += h.usd
		}
	}
	return t
}

// unhold notes that hold h ended. s.mu is held.
func (s *SpendLimits) unhold(h spendHold) {
	if st := s.tenants[h.tenant]; st != nil && st.held > 0 {
		st.held--
	}
	if s.ended != nil {
		close(s.ended)
		s.ended = nil
	}
}

// heldOnly reports whether refusal, for totals t, is due to the holds
// alone: what is spent, without them, reaches no limit. s.mu is held.
func (s *SpendLimits) heldOnly(tenantID string, t SpendTotals) bool {
	spent := SpendTotals{GlobalDay: s.global.dayUSD, GlobalMonth: s.global.monthUSD}
	if st := s.tenants[tenantID]; st != nil {
		spent.TenantDay, spent.TenantMonth = st.dayUSD, st.monthUSD
	}
	return spent != t && s.cfg.Refusal(tenantID, spent) == nil
}

// Reserve holds maxUSD for a model call of tenantID, refusing as Check
// does when what the tenant or all tenants spent and hold has reached a
// limit: so the limit is overshot by at most one call's reservation. The
// hold counts until it is settled, or for ReserveTTL. Settling counts the
// call's cost as Record does (alerts included), once, in the day and
// month the reservation was made in (so a call in flight at midnight
// counts in the day that held it, not in the new one).
func (s *SpendLimits) Reserve(ctx context.Context, tenantID string, maxUSD float64) (SettleSpend, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if notAmount(maxUSD) {
		return nil, fmt.Errorf("agent: reservation of %v USD is not a cost", maxUSD)
	}
	var wait clock.Timer // ReserveWait, from the first refusal
	defer func() {
		if wait != nil {
			wait.Stop()
		}
	}()
	var now time.Time
	var day, month string
	for {
		now = s.cfg.Clock.Now()
		day, month = s.period(now)
		s.mu.Lock()
		if !s.cfg.Enforced(ctx) {
			break
		}
		t := s.totals(tenantID, day, month, now)
		err := s.cfg.Refusal(tenantID, t)
		if err == nil {
			break
		}
		if s.cfg.ReserveWait <= 0 || !s.heldOnly(tenantID, t) {
			s.mu.Unlock()
			return nil, err
		}
		// Reached only with calls in flight: wait for one to end.
		if s.ended == nil {
			s.ended = make(chan struct{})
		}
		ended := s.ended
		s.mu.Unlock()
		if wait == nil {
			wait = s.cfg.Clock.NewTimer(s.cfg.ReserveWait)
		}
		select {
		case <-ended:
		case <-wait.C():
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.holds == nil {
		s.holds = make(map[uint64]spendHold)
	}
	s.nextID++
	id := s.nextID
	s.holds[id] = spendHold{tenant: tenantID, usd: maxUSD, day: day, month: month, expires: now.Add(s.cfg.ReserveTTL)}
	st := s.tenants[tenantID]
	if st == nil {
		st = new(spendState)
		s.tenants[tenantID] = st
	}
	st.held++
	s.mu.Unlock()
	var done bool
	return func(_ context.Context, cost float64) error {
		if notAmount(cost) {
			return fmt.Errorf("agent: spend of %v USD is not a cost", cost)
		}
		s.mu.Lock()
		if done {
			s.mu.Unlock()
			return nil
		}
		done = true
		s.mu.Unlock()
		s.add(tenantID, cost, id, day, month) // in the reservation's period
		return nil
	}, nil
}
