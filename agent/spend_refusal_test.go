package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
)

// A run the SpendGuard refuses ends with StatusRefused and a reason the
// host can show the user as it is (Result.Response); the error still wraps
// ErrSpendRefused and the guard's own error, so hosts can errors.Is them.
func TestSpendRefusalTellsTheUser(t *testing.T) {
	t.Run("limits", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			cfg  agent.SpendLimitsConfig
			want string
		}{
			{"tenant daily", agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.25}}, "Your daily spending limit of $0.25 is reached."},
			{"tenant monthly", agent.SpendLimitsConfig{PerTenant: map[string]agent.Limits{"alice": {MonthlyUSD: 0.2}}}, "Your monthly spending limit of $0.20 is reached."},
			{"global", agent.SpendLimitsConfig{Global: agent.Limits{DailyUSD: 0.1}}, "The service's daily spending limit is reached."},
		} {
			t.Run(tc.name, func(t *testing.T) {
				s := costly()
				o, _ := spendOrch(t, s, tc.cfg)
				if _, err := send(o, "alice", agent.SourceUser); err != nil {
					t.Fatal(err)
				}
				calls := s.Calls()
				for _, stream := range []bool{false, true} {
					var (
						res *agent.Result
						err error
					)
					if stream {
						for ev, e := range o.Stream(context.Background(), agent.Message{TenantID: "alice", ConversationID: "c", Text: "hi"}) {
							if ev.Type == agent.EventExecutionEnd {
								res, err = ev.Result, e
							}
						}
					} else {
						res, err = send(o, "alice", agent.SourceUser)
					}
					if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, agent.ErrSpendLimit) {
						t.Fatalf("err = %v", err)
					}
					if res == nil || res.Status != agent.StatusRefused || !strings.HasPrefix(res.Response, tc.want) {
						t.Fatalf("res = %+v, want refused with %q", res, tc.want)
					}
					if strings.Contains(res.Response, "agent:") || strings.Contains(res.Response, "alice") {
						t.Fatalf("the reason is not for the user: %q", res.Response)
					}
				}
				if s.Calls() != calls {
					t.Fatal("a refused run called the model")
				}
			})
		}
	})
	t.Run("failing guard", func(t *testing.T) {
		s := llmtest.NewScript(llmtest.Text("never"))
		o := newOrch(t, s, agent.Config{SpendGuard: &failingGuard{}})
		res, err := o.HandleMessage(context.Background(), msg("hi"))
		if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, errLedgerDown) {
			t.Fatalf("err = %v", err)
		}
		if res.Status != agent.StatusRefused || res.Response != agent.DefaultRefusalReason || strings.Contains(res.Response, "ledger") {
			t.Fatalf("res = %+v", res)
		}
	})
	t.Run("guard's own reason", func(t *testing.T) {
		s := llmtest.NewScript(llmtest.Text("never"))
		g := reasonGuard{}
		o := newOrch(t, s, agent.Config{SpendGuard: g})
		res, err := o.HandleMessage(context.Background(), msg("hi"))
		if !errors.Is(err, agent.ErrSpendRefused) || !errors.Is(err, errOverQuota) {
			t.Fatalf("err = %v", err)
		}
		if res.Status != agent.StatusRefused || res.Response != "Your plan's quota is used up until Monday." {
			t.Fatalf("res = %+v", res)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		g, _ := agent.NewSpendLimits(agent.SpendLimitsConfig{})
		o := newOrch(t, llmtest.NewScript(), agent.Config{SpendGuard: cancelling{g, cancel}})
		res, err := o.HandleMessage(ctx, msg("hi"))
		if !errors.Is(err, context.Canceled) || res.Status != agent.StatusCancelled {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
	})
}

var errOverQuota = errors.New("quota: plan exhausted")

// reasonGuard refuses every run with a reason of its own.
type reasonGuard struct{}

func (reasonGuard) Check(context.Context, string) error {
	return &agent.RefusalError{Reason: "Your plan's quota is used up until Monday.", Err: errOverQuota}
}
func (reasonGuard) Record(context.Context, string, agent.Consumed) error { return nil }

// cancelling ends the run's ctx while it checks: the run is cancelled,
// not refused.
type cancelling struct {
	*agent.SpendLimits
	cancel context.CancelFunc
}

func (c cancelling) Check(ctx context.Context, tenantID string) error {
	c.cancel()
	return c.SpendLimits.Check(ctx, tenantID)
}
