package spendtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// Guard is what the suite tests: a SpendReserver that tells what a tenant
// ("" for all tenants) spent today and this month.
type Guard interface {
	agent.SpendReserver
	Spent(ctx context.Context, tenantID string) (day, month float64, err error)
}

// Factory makes a store configured by cfg (cfg.Clock and cfg.Location
// are set by the suite) and returns open, which returns a guard on it:
// each call another guard value sharing the store, as replicas do (an
// in-memory guard returns the same one).
type Factory func(t *testing.T, cfg agent.SpendLimitsConfig) (open func() Guard)

// Memory adapts an agent.SpendLimits to Guard.
func Memory(g *agent.SpendLimits) Guard { return memGuard{g} }

type memGuard struct{ *agent.SpendLimits }

func (m memGuard) Spent(_ context.Context, tenantID string) (day, month float64, err error) {
	day, month = m.SpendLimits.Spent(tenantID)
	return day, month, nil
}

// zone is 5 hours behind UTC: days begin at 05:00 UTC.
var zone = time.FixedZone("UTC-5", -5*3600)

// start is 22:30 on 30 November in zone (03:30 UTC on 1 December).
var start = time.Date(2026, 11, 30, 22, 30, 0, 0, zone)

func user(tenant string) context.Context {
	return agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: tenant, ConversationID: "c", Source: agent.SourceUser})
}

func triggered(tenant string) context.Context {
	return agent.WithRunInfo(context.Background(), agent.RunInfo{TenantID: tenant, Source: agent.SourceTrigger, TaskID: "t1"})
}

type alerts struct {
	mu  sync.Mutex
	got []string
}

func (a *alerts) observe(x agent.SpendAlert) {
	a.mu.Lock()
	a.got = append(a.got, fmt.Sprintf("%s/%s/%s/%g", x.TenantID, x.Period, x.Key, x.Threshold))
	a.mu.Unlock()
}

func (a *alerts) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprint(a.got)
}

type env struct {
	t   *testing.T
	clk *clocktest.Clock
	al  *alerts
	g   Guard
	new func() Guard
}

func setup(t *testing.T, f Factory, cfg agent.SpendLimitsConfig) *env {
	t.Helper()
	e := &env{t: t, clk: clocktest.New(start), al: new(alerts)}
	cfg.Clock, cfg.Location = e.clk, zone
	if cfg.Observer == nil {
		cfg.Observer = e.al.observe
	}
	e.new = f(t, cfg)
	e.g = e.new()
	return e
}

func (e *env) record(g Guard, tenant string, usd float64) {
	e.t.Helper()
	if err := g.Record(user(tenant), tenant, agent.Consumed{Tokens: 1, CostUSD: usd}); err != nil {
		e.t.Fatalf("Record(%s, %v): %v", tenant, usd, err)
	}
}

func (e *env) spent(tenant string) (day, month float64) {
	e.t.Helper()
	day, month, err := e.g.Spent(context.Background(), tenant)
	if err != nil {
		e.t.Fatalf("Spent(%q): %v", tenant, err)
	}
	return day, month
}

// refused asserts err refuses with reason's prefix and ErrSpendLimit.
func refused(t *testing.T, err error, reason string) {
	t.Helper()
	var re *agent.RefusalError
	if !errors.As(err, &re) || !errors.Is(err, agent.ErrSpendLimit) || !strings.HasPrefix(re.Reason, reason) {
		t.Fatalf("err = %v, want a RefusalError %q wrapping ErrSpendLimit", err, reason)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// Run runs the conformance suite against the guards f makes.
func Run(t *testing.T, f Factory) {
	t.Run("tenant daily limit in the time zone", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}})
		for range 3 {
			e.record(e.g, "alice", 0.3)
		}
		if err := e.g.Check(user("alice"), "alice"); err != nil {
			t.Fatalf("at $0.90 of $1: %v", err)
		}
		e.record(e.g, "alice", 0.1) // ten cents more reach $1 to the micro-dollar
		refused(t, e.g.Check(user("alice"), "alice"), "Your daily spending limit of $1.00 is reached. Please try again tomorrow.")
		refused(t, e.g.Check(triggered("alice"), "alice"), "Your daily spending limit of $1.00 is reached.")
		if err := e.g.Check(user("bob"), "bob"); err != nil {
			t.Fatalf("another tenant: %v", err)
		}
		if day, month := e.spent("alice"); !near(day, 1) || !near(month, 1) {
			t.Fatalf("alice spent %v today, %v this month", day, month)
		}
		// 04:30 UTC is still the same day in the zone (23:30)...
		e.clk.Advance(time.Hour)
		refused(t, e.g.Check(user("alice"), "alice"), "Your daily spending limit")
		// ...and 05:30 UTC is the next one.
		e.clk.Advance(time.Hour)
		if err := e.g.Check(user("alice"), "alice"); err != nil {
			t.Fatalf("the next day in the zone: %v", err)
		}
		if day, _ := e.spent("alice"); day != 0 {
			t.Fatalf("the next day alice spent %v", day)
		}
	})

	t.Run("monthly limit of one tenant", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{PerTenant: map[string]agent.Limits{"alice": {MonthlyUSD: 0.5}}, Tenant: agent.Limits{DailyUSD: 100}})
		e.record(e.g, "alice", 0.5)
		e.record(e.g, "bob", 0.5)
		refused(t, e.g.Check(user("alice"), "alice"), "Your monthly spending limit of $0.50 is reached. Please try again next month.")
		if err := e.g.Check(user("bob"), "bob"); err != nil {
			t.Fatalf("bob has the Tenant limits: %v", err)
		}
		e.clk.Advance(24 * time.Hour) // 1 December in the zone: a new month
		if err := e.g.Check(user("alice"), "alice"); err != nil {
			t.Fatalf("the next month: %v", err)
		}
		e.record(e.g, "alice", 0.5)
		e.clk.Advance(24 * time.Hour)
		refused(t, e.g.Check(user("alice"), "alice"), "Your monthly spending limit")
	})

	t.Run("global limit", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Global: agent.Limits{DailyUSD: 0.5}})
		e.record(e.g, "a", 0.3)
		e.record(e.new(), "b", 0.3)
		err := e.g.Check(user("c"), "c")
		refused(t, err, "The service's daily spending limit is reached.")
		if strings.Contains(err.(*agent.RefusalError).Reason, "$") {
			t.Fatalf("a global refusal names the amount: %v", err)
		}
		if day, _ := e.spent(""); !near(day, 0.6) {
			t.Fatalf("all tenants spent %v", day)
		}
	})

	t.Run("pause non-critical", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.1}, OnLimit: agent.PauseNonCritical})
		e.record(e.g, "a", 0.2)
		refused(t, e.g.Check(triggered("a"), "a"), "Your daily spending limit")
		if err := e.g.Check(user("a"), "a"); err != nil {
			t.Fatalf("the user's own message: %v", err)
		}
		if _, err := e.g.Reserve(triggered("a"), "a", 0.01); err == nil {
			t.Fatal("a triggered run's call was reserved past the limit")
		}
		settle, err := e.g.Reserve(user("a"), "a", 0.01)
		if err != nil {
			t.Fatalf("the user's call: %v", err)
		}
		if err := settle(context.Background(), 0.01); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("alert only", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.1}, OnLimit: agent.AlertOnly})
		for range 3 {
			e.record(e.g, "a", 0.1)
			if err := e.g.Check(triggered("a"), "a"); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.g.Reserve(triggered("a"), "a", 1); err != nil {
			t.Fatal(err)
		}
		if got := e.al.String(); got != "[a/day/2026-11-30/0.5 a/day/2026-11-30/0.8 a/day/2026-11-30/0.9 a/day/2026-11-30/1]" {
			t.Fatalf("alerts = %s", got)
		}
	})

	t.Run("alerts once across replicas", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1, MonthlyUSD: 10}, Global: agent.Limits{DailyUSD: 100}})
		guards := []Guard{e.g, e.new()}
		var wg sync.WaitGroup
		for i := range 20 { // $0.10 each, from both replicas at once
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := guards[i%2].Record(user("a"), "a", agent.Consumed{CostUSD: 0.1}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		e.al.mu.Lock()
		got := slices.Clone(e.al.got)
		e.al.mu.Unlock()
		slices.Sort(got)
		want := []string{"a/day/2026-11-30/0.5", "a/day/2026-11-30/0.8", "a/day/2026-11-30/0.9", "a/day/2026-11-30/1"}
		if !slices.Equal(got, want) {
			t.Fatalf("alerts = %v, want each once: %v", got, want)
		}
		if day, _ := e.spent("a"); !near(day, 2) {
			t.Fatalf("a spent %v", day)
		}
	})

	t.Run("tenants apart", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}})
		for _, id := range []string{"a", "A", "a ", "a\u200b", "'; DROP TABLE x; --", "ä"} {
			e.record(e.g, id, 0.4)
		}
		e.record(e.g, "a", 0.6)
		refused(t, e.g.Check(user("a"), "a"), "Your daily spending limit")
		for _, id := range []string{"A", "a ", "a\u200b", "'; DROP TABLE x; --", "ä"} {
			if err := e.g.Check(user(id), id); err != nil {
				t.Fatalf("tenant %q: %v", id, err)
			}
			if day, _ := e.spent(id); !near(day, 0.4) {
				t.Fatalf("tenant %q spent %v", id, day)
			}
		}
	})

	t.Run("reservations hold until settled", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}})
		other := e.new()
		s1, err := e.g.Reserve(triggered("a"), "a", 0.6)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := other.Reserve(triggered("a"), "a", 0.6) // $0.60 held < $1
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.g.Reserve(triggered("a"), "a", 0.01); err == nil {
			t.Fatal("reserved past the limit: $1.20 is held")
		}
		refused(t, other.Check(triggered("a"), "a"), "Your daily spending limit")
		if err := s1(context.Background(), 0.1); err != nil {
			t.Fatal(err)
		}
		if err := s1(context.Background(), 0.1); err != nil { // settled once only
			t.Fatal(err)
		}
		if day, _ := e.spent("a"); !near(day, 0.1) {
			t.Fatalf("spent %v after one settlement of $0.10", day)
		}
		s3, err := other.Reserve(triggered("a"), "a", 0.2) // 0.1 + 0.6 held
		if err != nil {
			t.Fatal(err)
		}
		if err := s2(context.Background(), 0); err != nil {
			t.Fatal(err)
		}
		if err := s3(context.Background(), 0.2); err != nil {
			t.Fatal(err)
		}
		if day, _ := e.spent("a"); !near(day, 0.3) {
			t.Fatalf("spent %v, want $0.30", day)
		}
		if err := e.g.Check(triggered("a"), "a"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("reservation not settled expires", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}, ReserveTTL: 10 * time.Minute})
		if _, err := e.g.Reserve(triggered("a"), "a", 5); err != nil { // its replica dies
			t.Fatal(err)
		}
		refused(t, e.new().Check(triggered("a"), "a"), "Your daily spending limit")
		e.clk.Advance(10 * time.Minute)
		if _, err := e.new().Reserve(triggered("a"), "a", 0.5); err != nil {
			t.Fatalf("after the TTL: %v", err)
		}
	})

	t.Run("reserve waits for calls in flight, up to ReserveWait", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}, ReserveWait: time.Minute})
		held, err := e.g.Reserve(triggered("a"), "a", 1) // in flight, holding the limit
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := e.new().Reserve(triggered("a"), "a", 0.5)
			done <- err
		}()
		if err := e.clk.AwaitTimers(context.Background(), 1); err != nil { // it waits
			t.Fatal(err)
		}
		e.clk.Advance(time.Minute) // nobody settled meanwhile
		refused(t, <-done, "Your daily spending limit")
		if err := held(context.Background(), 0.9); err != nil {
			t.Fatal(err)
		}
		if _, err := e.g.Reserve(triggered("a"), "a", 0.5); err != nil { // $0.90 spent: below the limit
			t.Fatal(err)
		}
		// Spent alone reaches the limit: refused at once, no wait.
		e.record(e.g, "a", 0.1)
		if _, err := e.g.Reserve(triggered("a"), "a", 0.5); !errors.Is(err, agent.ErrSpendLimit) {
			t.Fatalf("at the limit: %v", err)
		}
	})

	t.Run("concurrent calls on two replicas", func(t *testing.T) {
		const limit, call = 2.0, 0.05
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: limit}})
		guards := []Guard{e.g, e.new()}
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g := guards[i%2]
				for {
					settle, err := g.Reserve(triggered("a"), "a", call)
					if err != nil {
						if !errors.Is(err, agent.ErrSpendLimit) {
							t.Error(err)
						}
						return
					}
					if err := settle(context.Background(), call); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		day, _ := e.spent("a")
		if day < limit-1e-9 || day > limit+call+1e-9 {
			t.Fatalf("spent $%v with a $%v limit and $%v calls", day, limit, call)
		}
	})

	t.Run("concurrent calls of many tenants against the global limit", func(t *testing.T) {
		const limit, call = 1.0, 0.05
		e := setup(t, f, agent.SpendLimitsConfig{Global: agent.Limits{DailyUSD: limit}, Tenant: agent.Limits{DailyUSD: 10}})
		guards := []Guard{e.g, e.new()}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				g, tenant := guards[i%2], fmt.Sprint("t", i%5)
				for {
					settle, err := g.Reserve(triggered(tenant), tenant, call)
					if err != nil {
						if !errors.Is(err, agent.ErrSpendLimit) {
							t.Error(err)
						}
						return
					}
					if err := settle(context.Background(), call); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		day, _ := e.spent("")
		if day < limit-1e-9 || day > limit+call+1e-9 {
			t.Fatalf("all tenants spent $%v with a $%v global limit and $%v calls", day, limit, call)
		}
		refused(t, e.g.Check(triggered("t9"), "t9"), "The service's daily spending limit is reached.")
	})

	t.Run("refused run", func(t *testing.T) {
		e := setup(t, f, agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.5}})
		model := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply {
			return llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}} // $0.30
		})
		o, err := agent.NewOrchestrator(agent.Config{
			LLM:        model,
			Prices:     agent.Prices{llmtest.ModelName: {InputPerMillion: 100, OutputPerMillion: 1000}},
			SpendGuard: e.g,
			Clock:      e.clk,
			Logger:     slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		msg := agent.Message{TenantID: "alice", ConversationID: "c", Text: "hi"}
		for range 2 {
			if _, err := o.HandleMessage(context.Background(), msg); err != nil {
				t.Fatal(err)
			}
		}
		calls := model.Calls()
		res, err := o.HandleMessage(context.Background(), msg)
		if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, agent.ErrSpendLimit) || res == nil || res.Status != agent.StatusRefused ||
			res.Response != "Your daily spending limit of $0.50 is reached. Please try again tomorrow." || model.Calls() != calls {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
		if day, _ := e.spent("alice"); !near(day, 0.6) {
			t.Fatalf("alice spent %v, want $0.60", day)
		}
	})
}
