package agent

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"
)

// SpendGuard limits spending across runs (Config.SpendGuard). Check runs
// before a run makes any model call: an error refuses the run — a guard
// that fails refuses, it never lets runs go unlimited. A refused run's
// Result has Status StatusRefused and, as Response, the Reason of a
// *RefusalError in Check's error, else DefaultRefusalReason: text for the
// user, to show as it is. HandleMessage (and ResolveApproval) return that
// Result with an error wrapping ErrSpendRefused and Check's error. (When
// the caller's ctx ended during Check, the run is cancelled instead.) Record runs after each run Check
// allowed that used anything, with what it used; its error is logged.
// RunInfoFrom(ctx) tells both about the run. Implementations must be safe
// for concurrent use. A guard that is also a SpendReserver reserves each
// model call of the run before it is made (see SpendReserver). SpendLimits
// is the in-memory one, counting in one process; agent/pgspend's counts
// on PostgreSQL, shared by replicas and kept across restarts. Both pass
// agent/spendtest's conformance suite.
type SpendGuard interface {
	Check(ctx context.Context, tenantID string) error
	Record(ctx context.Context, tenantID string, c Consumed) error
}

// RefusalError is an error a SpendGuard's Check may return to refuse a
// run with a reason for the user: Reason becomes the Result's Response as
// it is, for the host to show; Err is the cause, for errors.Is and the
// logs (SpendLimits' wraps ErrSpendLimit). Error returns Err's text (or
// Reason when Err is nil).
type RefusalError struct {
	Reason string
	Err    error
}

func (e *RefusalError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Err.Error()
}

// Unwrap returns Err.
func (e *RefusalError) Unwrap() error { return e.Err }

// DefaultRefusalReason is the Response of a run a SpendGuard refused
// with an error that carries no RefusalError (a guard that failed, say).
const DefaultRefusalReason = "Sorry, this request was not run: the spending limits do not allow it right now."

// RunInfo describes the run a SpendGuard is asked about.
type RunInfo struct {
	TenantID, ConversationID string
	Source, TaskID           string // SourceUser or SourceTrigger; the trigger task
}

type runInfoKey struct{}

// RunInfoFrom returns the RunInfo the orchestrator put in ctx for its
// SpendGuard.
func RunInfoFrom(ctx context.Context) (RunInfo, bool) {
	ri, ok := ctx.Value(runInfoKey{}).(RunInfo)
	return ri, ok
}

// WithRunInfo returns ctx telling a SpendGuard about the run ri, as the
// orchestrator does: for a guard's tests (agent/spendtest) and for
// callers that use a guard outside runs.
func WithRunInfo(ctx context.Context, ri RunInfo) context.Context {
	return context.WithValue(ctx, runInfoKey{}, ri)
}

func (r *run) info() RunInfo {
	return RunInfo{TenantID: r.msg.TenantID, ConversationID: r.msg.ConversationID, Source: r.msg.Source, TaskID: r.msg.TaskID}
}

// checkSpend asks the SpendGuard whether the run may start.
func (r *run) checkSpend() error {
	g := r.o.guard
	if g == nil {
		return nil
	}
	if err := g.Check(context.WithValue(r.ctx, runInfoKey{}, r.info()), r.msg.TenantID); err != nil {
		if r.ctx.Err() != nil {
			return err // the caller left: cancelled, not refused
		}
		r.res.Status, r.res.Response = StatusRefused, DefaultRefusalReason
		if re := (*RefusalError)(nil); errors.As(err, &re) && strings.TrimSpace(re.Reason) != "" {
			r.res.Response = re.Reason
		}
		err = fmt.Errorf("%w: %w", ErrSpendRefused, err)
		if r.o.obs != nil {
			r.step(Step{Kind: StepSpendRefused, Text: r.res.Response, Err: err})
		}
		return err
	}
	r.guarded = true
	r.reserver, _ = g.(SpendReserver)
	return nil
}

// spendRecordTimeout bounds Record after a run whose ctx has ended.
const spendRecordTimeout = 10 * time.Second

// recordSpend tells the SpendGuard what an allowed run used.
func (r *run) recordSpend() {
	c := r.res.Consumed
	// What settled reservations counted is not counted again.
	c.CostUSD = max(c.CostUSD-r.settledUSD, 0)
	if !r.guarded || c.Tokens == 0 && c.ToolCalls == 0 && c.CostUSD == 0 {
		return
	}
	ctx := context.WithValue(context.WithoutCancel(r.ctx), runInfoKey{}, r.info())
	ctx, cancel := context.WithTimeout(ctx, spendRecordTimeout)
	defer cancel()
	if err := r.o.guard.Record(ctx, r.msg.TenantID, c); err != nil {
		r.log().ErrorContext(r.ctx, "agent: recording the run's spend failed", "source", r.msg.Source, "task_id", r.msg.TaskID, "cost_usd", c.CostUSD, "err", err)
	}
}

// OnLimit is what SpendLimits does when a limit is reached.
type OnLimit int

const (
	// PauseAll refuses every run of the tenant (or, for a global limit,
	// of every tenant) until the period ends.
	PauseAll OnLimit = iota
	// PauseNonCritical refuses triggered runs (Source SourceTrigger) and
	// lets the users' own messages through.
	PauseNonCritical
	// AlertOnly refuses nothing; the observer hears of the limit.
	AlertOnly
)

// ErrSpendLimit is the error of a SpendLimits that refuses a run.
var ErrSpendLimit = errors.New("agent: spend limit reached")

// Limits are spending limits in US dollars; zero is no limit.
type Limits struct {
	DailyUSD, MonthlyUSD float64
}

// SpendAlert tells the observer a spend passed a threshold of a limit.
type SpendAlert struct {
	TenantID  string  // "" for the global limit
	Period    string  // "day" or "month"
	Key       string  // the period: "2026-11-22" or "2026-11"
	SpentUSD  float64 // in the period so far
	LimitUSD  float64
	Threshold float64 // the share passed: 0.5, 0.8, 0.9, or 1 when the limit is reached
}

// SpendLimitsConfig configures SpendLimits. The zero value limits nothing.
type SpendLimitsConfig struct {
	Tenant    Limits            // every tenant's, unless PerTenant names it
	PerTenant map[string]Limits // limits of particular tenants
	Global    Limits            // all tenants together
	// Alerts are the shares of a limit at which Observer is called, once
	// per limit and period. Default 0.5, 0.8 and 0.9; reaching the limit
	// (1) is always reported.
	Alerts []float64
	// OnLimit says what happens at a limit. Default PauseAll.
	OnLimit OnLimit
	// Observer hears alerts; it must not block for long. Optional.
	Observer func(SpendAlert)
	// Location sets where days and months begin. Default UTC.
	Location *time.Location
	// Clock gives the time that decides the day and the month. Nil:
	// clock.System.
	Clock clock.Clock
	// ReserveTTL is how long a model call's reservation (Reserve) holds
	// budget when it is never settled — its process died: after it, the
	// reservation no longer counts. It must exceed the longest model
	// call (LoopConfig.LLMTimeout). Default 15 minutes.
	ReserveTTL time.Duration
	// ReserveWait is how long Reserve waits, when a limit is reached only
	// with the reservations of calls in flight (what is spent alone is
	// below it), for them to settle before refusing: a call that would
	// fit once they settle at their real cost is then made instead of
	// refused. Zero: refuse at once.
	ReserveWait time.Duration
}

// DefaultReserveTTL is SpendLimitsConfig.ReserveTTL's default.
const DefaultReserveTTL = 15 * time.Minute

// LimitsOf returns the limits of tenantID: PerTenant's, else Tenant.
func (c SpendLimitsConfig) LimitsOf(tenantID string) Limits {
	if l, ok := c.PerTenant[tenantID]; ok {
		return l
	}
	return c.Tenant
}

// SpendTotals is what a tenant and all tenants together spent (and hold
// in reservations) in the current day and month.
type SpendTotals struct {
	TenantDay, TenantMonth, GlobalDay, GlobalMonth float64
}

// Refusal returns the *RefusalError of a run of tenantID when t reaches
// one of c's limits (the global ones first), else nil, whatever OnLimit
// says: a SpendGuard built on SpendLimitsConfig (agent/pgspend) refuses
// with the same reasons as SpendLimits. The Reason is for the user ("Your
// daily spending limit of $2.00 is reached. Please try again tomorrow.";
// a global limit names no amount); Err wraps ErrSpendLimit with the
// figures, for the logs.
func (c SpendLimitsConfig) Refusal(tenantID string, t SpendTotals) error {
	lim := c.LimitsOf(tenantID)
	refuse := func(reason, format string, args ...any) error {
		return &RefusalError{Reason: reason, Err: fmt.Errorf("%w: "+format, append([]any{ErrSpendLimit}, args...)...)}
	}
	switch {
	case reached(t.GlobalDay, c.Global.DailyUSD):
		return refuse("The service's daily spending limit is reached. Please try again tomorrow.",
			"all tenants spent $%.2f today, the daily limit is $%.2f", t.GlobalDay, c.Global.DailyUSD)
	case reached(t.GlobalMonth, c.Global.MonthlyUSD):
		return refuse("The service's monthly spending limit is reached. Please try again next month.",
			"all tenants spent $%.2f this month, the monthly limit is $%.2f", t.GlobalMonth, c.Global.MonthlyUSD)
	case reached(t.TenantDay, lim.DailyUSD):
		return refuse(fmt.Sprintf("Your daily spending limit of $%.2f is reached. Please try again tomorrow.", lim.DailyUSD),
			"tenant %s spent $%.2f today, its daily limit is $%.2f", tenantID, t.TenantDay, lim.DailyUSD)
	case reached(t.TenantMonth, lim.MonthlyUSD):
		return refuse(fmt.Sprintf("Your monthly spending limit of $%.2f is reached. Please try again next month.", lim.MonthlyUSD),
			"tenant %s spent $%.2f this month, its monthly limit is $%.2f", tenantID, t.TenantMonth, lim.MonthlyUSD)
	}
	return nil
}

// Enforced reports whether OnLimit refuses the run ctx describes
// (RunInfoFrom): never with AlertOnly, only triggered runs with
// PauseNonCritical.
func (c SpendLimitsConfig) Enforced(ctx context.Context) bool {
	switch c.OnLimit {
	case AlertOnly:
		return false
	case PauseNonCritical:
		ri, ok := RunInfoFrom(ctx)
		return ok && ri.Source != SourceUser && ri.Source != ""
	}
	return true
}

// SpendLimits is the in-memory SpendGuard: daily and monthly limits in US
// dollars per tenant and for all tenants together, alerts at thresholds,
// and an action at the limit. Spend is counted in this process only (a
// restart starts from zero) and kept for the current day and month only.
//
// Limits are checked when a run starts, and each model call of a run is
// reserved before it is made (SpendLimits is a SpendReserver): what is
// spent and held by calls in flight is counted, a call is refused once
// that reaches a limit, so in one process a limit is overshot by at most
// one call's reservation (plus what a model counts beyond the input's
// estimate). Sub-agents' calls and the calls of fact extractions
// (MemoryOptions.Extract) are reserved like a run's. Replicas each count
// their own spend: use agent/pgspend to share it.
type SpendLimits struct {
	cfg     SpendLimitsConfig
	mu      sync.Mutex
	tenants map[string]*spendState
	global  spendState
	pruned  int // tenants left by the last prune

	// Alerts wait in queue, in the order Record found them, and one
	// Record at a time delivers them (outside mu): the observer hears
	// them in order, and a slow observer never holds up Check.
	queue      []SpendAlert
	delivering bool

	// Reservations not settled yet (spend_reserve.go), by id; ended is
	// closed (and cleared) when one ends, waking the Reserves waiting.
	holds  map[uint64]spendHold
	nextID uint64
	ended  chan struct{}
}

// spendState is one spender's totals in the current day and month.
type spendState struct {
	day, month       string
	dayUSD, monthUSD float64
	dayAlerts        int // how many thresholds of the day were reported
	monthAlerts      int
	held             int // reservations of this spender not settled
}

// NewSpendLimits checks cfg and returns the guard.
func NewSpendLimits(cfg SpendLimitsConfig) (*SpendLimits, error) {
	lims := []Limits{cfg.Tenant, cfg.Global}
	for _, l := range cfg.PerTenant {
		lims = append(lims, l)
	}
	for _, l := range lims {
		if notAmount(l.DailyUSD) || notAmount(l.MonthlyUSD) {
			return nil, fmt.Errorf("%w: spend limit %+v", ErrInvalidConfig, l)
		}
	}
	if cfg.Alerts == nil {
		cfg.Alerts = []float64{0.5, 0.8, 0.9}
	}
	for _, a := range cfg.Alerts {
		if !(a > 0 && a < 1) {
			return nil, fmt.Errorf("%w: spend alert threshold %v: want a share between 0 and 1", ErrInvalidConfig, a)
		}
	}
	cfg.Alerts = append(slices.Sorted(slices.Values(cfg.Alerts)), 1)
	if cfg.OnLimit < PauseAll || cfg.OnLimit > AlertOnly {
		return nil, fmt.Errorf("%w: OnLimit %d", ErrInvalidConfig, cfg.OnLimit)
	}
	if cfg.Location == nil {
		cfg.Location = time.UTC
	}
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.ReserveTTL < 0 || cfg.ReserveWait < 0 {
		return nil, fmt.Errorf("%w: ReserveTTL %v, ReserveWait %v", ErrInvalidConfig, cfg.ReserveTTL, cfg.ReserveWait)
	}
	if cfg.ReserveTTL == 0 {
		cfg.ReserveTTL = DefaultReserveTTL
	}
	return &SpendLimits{cfg: cfg, tenants: make(map[string]*spendState)}, nil
}

func (s *SpendLimits) limitsOf(tenantID string) Limits { return s.cfg.LimitsOf(tenantID) }

// roll moves st to the period of now, starting from zero in a new one.
func (st *spendState) roll(day, month string) {
	if st.day != day {
		st.day, st.dayUSD, st.dayAlerts = day, 0, 0
	}
	if st.month != month {
		st.month, st.monthUSD, st.monthAlerts = month, 0, 0
	}
}

// reached reports whether spent has reached limit, to the micro-dollar:
// ten runs of $0.10 reach $1 although their float sum is 0.9999999999.
func reached(spent, limit float64) bool {
	return limit > 0 && math.Round(spent*1e6) >= math.Round(limit*1e6)
}

// Check refuses the run when the tenant's or the global daily or monthly
// limit is reached, as OnLimit says, with a *RefusalError whose Reason is
// for the user ("Your daily spending limit of $2.00 is reached. Please
// try again tomorrow."; a global limit names no amount) and whose Err
// wraps ErrSpendLimit with the figures, for the logs.
func (s *SpendLimits) Check(ctx context.Context, tenantID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.cfg.Enforced(ctx) {
		return nil
	}
	now := s.cfg.Clock.Now()
	day, month := s.period(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Refusal(tenantID, s.totals(tenantID, day, month, now))
}

// Record adds a run's cost to the tenant's and the global totals and
// reports the thresholds it passed.
func (s *SpendLimits) Record(ctx context.Context, tenantID string, c Consumed) error {
	if notAmount(c.CostUSD) {
		return fmt.Errorf("agent: spend of %v USD is not a cost", c.CostUSD)
	}
	day, month := s.period(s.cfg.Clock.Now())
	s.add(tenantID, c.CostUSD, 0, day, month)
	return nil
}

// add counts cost to the tenant's and the global totals of the period
// day and month (a reservation's own: a call reserved before midnight
// and settled after it counts in the day its reservation was counted
// in, never in the new day, which did not see it), ends the reservation
// hold (0: none) and reports the thresholds passed. A period already
// over is not kept in memory: its share is dropped.
func (s *SpendLimits) add(tenantID string, cost float64, hold uint64, day, month string) {
	nowDay, nowMonth := s.period(s.cfg.Clock.Now())
	var alerts []SpendAlert
	s.mu.Lock()
	if hold != 0 {
		if h, ok := s.holds[hold]; ok {
			delete(s.holds, hold)
			s.unhold(h)
		}
	}
	t := s.tenants[tenantID]
	if t == nil {
		t = new(spendState)
		s.tenants[tenantID] = t
	}
	for _, x := range []struct {
		st  *spendState
		id  string
		lim Limits
	}{{t, tenantID, s.limitsOf(tenantID)}, {&s.global, "", s.cfg.Global}} {
		x.st.roll(nowDay, nowMonth)
		if day == nowDay {
			x.st.dayUSD += cost
			alerts = s.passed(alerts, x.id, "day", day, x.st.dayUSD, x.lim.DailyUSD, &x.st.dayAlerts)
		}
		if month == nowMonth {
			x.st.monthUSD += cost
			alerts = s.passed(alerts, x.id, "month", month, x.st.monthUSD, x.lim.MonthlyUSD, &x.st.monthAlerts)
		}
	}
	s.prune(nowMonth)
	if s.cfg.Observer == nil || len(alerts) == 0 && len(s.queue) == 0 {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, alerts...)
	if s.delivering {
		s.mu.Unlock() // the Record delivering will deliver these too
		return
	}
	s.delivering = true
	for len(s.queue) > 0 {
		batch := s.queue
		s.queue = nil
		s.mu.Unlock()
		for _, a := range batch {
			s.cfg.Observer(a)
		}
		s.mu.Lock()
	}
	s.delivering = false
	s.mu.Unlock()
}

// passed appends an alert for each threshold spent has newly passed.
func (s *SpendLimits) passed(out []SpendAlert, tenant, period, key string, spent, limit float64, done *int) []SpendAlert {
	if limit <= 0 {
		return out
	}
	for *done < len(s.cfg.Alerts) && reached(spent, s.cfg.Alerts[*done]*limit) {
		out = append(out, SpendAlert{TenantID: tenant, Period: period, Key: key, SpentUSD: spent, LimitUSD: limit, Threshold: s.cfg.Alerts[*done]})
		*done++
	}
	return out
}

// prune drops tenants with nothing spent this month, so the map holds
// only this month's spenders. It runs when the map has doubled since the
// last prune, keeping its cost amortised O(1) per Record.
func (s *SpendLimits) prune(month string) {
	if len(s.tenants) < 1024 || len(s.tenants) < 2*s.pruned {
		return
	}
	for id, t := range s.tenants {
		if t.month != month && t.held == 0 {
			delete(s.tenants, id)
		}
	}
	s.pruned = len(s.tenants)
}

// Spent returns what the tenant ("" for all tenants) spent today and this
// month.
func (s *SpendLimits) Spent(tenantID string) (day, month float64) {
	now := s.cfg.Clock.Now().In(s.cfg.Location)
	d, m := now.Format("2006-01-02"), now.Format("2006-01")
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.global
	if tenantID != "" {
		st = s.tenants[tenantID]
		if st == nil {
			return 0, 0
		}
	}
	st.roll(d, m)
	return st.dayUSD, st.monthUSD
}
