package agent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// Floating-point totals: ten runs of $0.10 sum to 0.9999999999999999, so
// a $1 daily limit is not "reached" and an 11th run is let through.
func TestSpendFloatSumMissesLimit(t *testing.T) {
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 10 {
		if err := g.Record(ctx, "t", agent.Consumed{CostUSD: 0.1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.Check(ctx, "t"); !errors.Is(err, agent.ErrSpendLimit) {
		day, _ := g.Spent("t")
		t.Errorf("after 10 × $0.10 against a $1 limit (spent %.17g): Check = %v, want ErrSpendLimit", day, err)
	}
}

// Alerts are collected under the lock but delivered after it, per Record:
// concurrent Records deliver them out of order (90% before 50%).
func TestSpendAlertOrder(t *testing.T) {
	var mu sync.Mutex
	var got []float64
	first := make(chan struct{})
	release := make(chan struct{})
	var blocked atomic.Bool
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 1}, Observer: func(a agent.SpendAlert) {
		if a.TenantID == "" {
			return
		}
		if blocked.CompareAndSwap(false, true) {
			close(first)
			<-release
		}
		mu.Lock()
		got = append(got, a.Threshold)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	done := make(chan struct{})
	go func() { _ = g.Record(ctx, "t", agent.Consumed{CostUSD: 0.55}); close(done) }()
	<-first
	_ = g.Record(ctx, "t", agent.Consumed{CostUSD: 0.4}) // 0.95: 80% and 90%
	close(release)
	<-done
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] < got[i-1] {
			t.Errorf("alerts delivered out of order: %v", got)
			break
		}
	}
}

// Under PauseNonCritical a user's decision on an approval a triggered run
// raised is refused (resolve takes the entry's Source): the user cannot
// even Cancel the pending action until the period ends.
func TestSpendPauseNonCriticalBlocksUserCancel(t *testing.T) {
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if len(req.Tools) > 0 && len(req.Messages) > 0 && strings.Contains(req.Messages[len(req.Messages)-1].Content, "mail") {
			r := llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))
			r.Usage = llm.Usage{InputTokens: 1000, OutputTokens: 200}
			return r
		}
		return llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 200}}
	})
	g, err := agent.NewSpendLimits(agent.SpendLimitsConfig{Tenant: agent.Limits{DailyUSD: 0.2}, OnLimit: agent.PauseNonCritical})
	if err != nil {
		t.Fatal(err)
	}
	o := agentsOrch(t, s, agent.Config{Prices: testPrices, SpendGuard: g, Loop: agent.LoopConfig{DirectAgentPrompts: true}}, &emailAgent{}, &noteAgent{})
	m := msg("[Scheduled Task] mail the team")
	m.Source, m.TaskID = agent.SourceTrigger, "task-1"
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	// $0.30 spent: the tenant is over its $0.20 limit.
	_, err = o.ResolveApproval(context.Background(), "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Cancel})
	if errors.Is(err, agent.ErrSpendRefused) {
		t.Errorf("the user's Cancel of a triggered run's approval was refused under PauseNonCritical: %v", err)
	}
}

// r3RecordFails allows every run and fails every Record.
type r3RecordFails struct{}

func (r3RecordFails) Check(context.Context, string) error { return nil }
func (r3RecordFails) Record(context.Context, string, agent.Consumed) error {
	return errors.New("ledger down")
}

// Message.Source and TaskID are documented to reach the logs; the run's
// log lines (here: recording the spend failed) carry neither.
func TestSourceTaskInLogs(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	h := slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil)
	s := llmtest.NewScript(llmtest.Reply{Text: "ok", Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}})
	o := newOrch(t, s, agent.Config{SpendGuard: r3RecordFails{}, Logger: slog.New(h)})
	m := msg("hi")
	m.Source, m.TaskID = agent.SourceTrigger, "task-42"
	if _, err := o.HandleMessage(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	logs := buf.String()
	mu.Unlock()
	if !strings.Contains(logs, "ledger down") {
		t.Fatalf("no log of the failed Record: %q", logs)
	}
	if !strings.Contains(logs, "task-42") || !strings.Contains(logs, agent.SourceTrigger) {
		t.Errorf("the log line lacks the run's Source/TaskID: %q", logs)
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
