package agent_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// ledger is a SpendGuard that records what it is told and refuses every
// run once refuse is set.
type ledger struct {
	mu      sync.Mutex
	tokens  int
	checks  int
	refuse  atomic.Bool
	records []agent.RunInfo
}

func (l *ledger) Check(ctx context.Context, _ string) error {
	l.mu.Lock()
	l.checks++
	l.mu.Unlock()
	if l.refuse.Load() {
		return &agent.RefusalError{Reason: "Daily limit reached.", Err: errors.New("limit")}
	}
	return nil
}

func (l *ledger) Record(ctx context.Context, _ string, c agent.Consumed) error {
	ri, _ := agent.RunInfoFrom(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens += c.Tokens
	l.records = append(l.records, ri)
	return nil
}

// A background graph's sub-agents are runs like any other for the
// SpendGuard: what they used is recorded (so a tenant's daily limit
// counts them), and a guard that refuses the tenant stops them from
// starting — background work is not a way around the spending limits.
func TestBackgroundTasksGoThroughSpendGuard(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		name := map[bool]string{false: "recorded", true: "refused"}[refuse]
		t.Run(name, func(t *testing.T) {
			var workerCalls atomic.Int32
			model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
				if isWorker(req) {
					workerCalls.Add(1)
					return llmtest.Reply{Text: "checked", Usage: llm.Usage{InputTokens: 500}}
				}
				return llmtest.Reply{Text: "Noted.", Usage: llm.Usage{InputTokens: 5}}
			})
			guard := &ledger{}
			guard.refuse.Store(refuse)
			eng := fastEngine(t, 1)
			o := newOrch(t, model, agent.Config{Clock: clock.System{}, SpendGuard: guard,
				SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
			runEngine(t, eng, o)
			g, err := delegate.NewGraph("u1", "c1", []delegate.TaskSpec{{ID: "a", Task: "Check A."}, {ID: "b", Task: "Check B."}})
			if err != nil {
				t.Fatal(err)
			}
			if err := eng.Submit(context.Background(), g); err != nil {
				t.Fatal(err)
			}
			awaitGraphEnd(t, eng, "u1", g.ID)
			guard.mu.Lock()
			defer guard.mu.Unlock()
			if refuse {
				if n := workerCalls.Load(); n != 0 {
					t.Fatalf("the spend guard refuses the tenant, yet the background tasks made %d model calls", n)
				}
				return
			}
			if guard.tokens < 1000 {
				t.Fatalf("the spend guard was told of %d tokens (records %+v), want the tasks' 1000 among them", guard.tokens, guard.records)
			}
		})
	}
}
