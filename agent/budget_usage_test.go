package agent_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A model that reports far more input tokens than valet's estimate
// (characters / 4; a real tokenizer, a provider's hidden prompt): the
// budget plans each call from the last reported input count, so the run
// does not make a call with tools it cannot follow with the answer. It
// ends completed with the answer of one last call without tools, within
// the budget, instead of "used 3660 of 3000" and no answer.
//
// The guarantee: a call is made only when its planned input (the
// estimate scaled by how far the last reported count exceeded its own
// estimate) and budgetReserve output tokens fit what is left, and a call
// with tools only when the last call without tools would still fit after
// it; so Consumed.Tokens stays within MaxTokens unless a call's real input
// exceeds its plan (here it never does: every call reports 1200).
func TestBudgetTokensPlannedFromReportedUsage(t *testing.T) {
	var runs atomic.Int32
	reported := llm.Usage{InputTokens: 1200, OutputTokens: 20}
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if err := llm.CheckPairing(req.Messages); err != nil {
			t.Errorf("request breaks pairing: %v", err)
		}
		if len(req.Tools) == 0 {
			return llmtest.Reply{Text: "Paris is sunny; I did not get to Rome.", Usage: reported}
		}
		r := weatherCalls("Paris")
		if strings.Contains(req.Messages[len(req.Messages)-1].Content, "Sunny in Paris") {
			r = weatherCalls("Rome")
		}
		r.Usage = reported
		return r
	})
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
	m := msg("Weather in Paris and Rome?")
	m.Budget = agent.Budget{MaxTokens: 3000}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || res.Status != agent.StatusCompleted || !res.BudgetExceeded || res.Response != "Paris is sunny; I did not get to Rome." {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	if res.Consumed.Tokens > m.Budget.MaxTokens {
		t.Fatalf("Consumed.Tokens = %d, over the budget of %d", res.Consumed.Tokens, m.Budget.MaxTokens)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || len(reqs[0].Tools) == 0 || len(reqs[1].Tools) != 0 {
		t.Fatalf("%d model calls; want one with tools, then the last one without", len(reqs))
	}
	if !hasNote(reqs[1].Messages, "The budget for this request is spent") {
		t.Fatal("the last call has no spent note")
	}
	// The last call may write at most what the budget leaves.
	if mt := reqs[1].MaxTokens; mt <= 0 || mt > 3000-1220-1200 {
		t.Fatalf("last call MaxTokens = %d", mt)
	}
}

// What a model reported about its input count is not forgotten between
// runs: a model counting far more input tokens than the estimate (a
// provider's hidden prompt) leaves no room for a last answer once its
// first call with tools is made, but the next message with the same
// budget is planned from that report from its first call, so it skips the
// call with tools and answers in one call without tools (completed,
// BudgetExceeded) instead of ending, like every message before, with
// ErrBudgetExceeded and no answer.
func TestBudgetTokensPlannedFromReportedUsageOfEarlierRuns(t *testing.T) {
	var runs atomic.Int32
	reported := llm.Usage{InputTokens: 1800, OutputTokens: 20}
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if len(req.Tools) == 0 {
			return llmtest.Reply{Text: "I could not look it up within the budget.", Usage: reported}
		}
		r := weatherCalls("Paris")
		r.Usage = reported
		return r
	})
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
	first := msg("Weather in Paris?")
	first.Budget = agent.Budget{MaxTokens: 3000}
	_, _ = o.HandleMessage(context.Background(), first) // learns how the model counts
	second := msg("And in Rome?")
	second.Budget = first.Budget
	res, err := o.HandleMessage(context.Background(), second)
	if err != nil || res.Status != agent.StatusCompleted || !res.BudgetExceeded || res.Response != "I could not look it up within the budget." {
		t.Fatalf("the second message: res = %+v, err = %v", res, err)
	}
	if res.Consumed.Tokens > second.Budget.MaxTokens {
		t.Fatalf("Consumed.Tokens = %d, over the budget of %d", res.Consumed.Tokens, second.Budget.MaxTokens)
	}
}

// How a model counted one tenant's text (CJK, emoji: far more tokens than
// characters / 4) does not shape another tenant's planning: after tenant
// u1's run taught the orchestrator that its model counts about six times
// the estimate, tenant u2's first call is still planned from the estimate
// and made with tools, while u1's next message skips the call with tools.
func TestBudgetUsageScaleIsPerTenant(t *testing.T) {
	var runs atomic.Int32
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		u := llm.Usage{InputTokens: 1800, OutputTokens: 20}
		if len(req.Tools) == 0 {
			return llmtest.Reply{Text: "No time to look it up.", Usage: u}
		}
		r := weatherCalls("Paris")
		r.Usage = u
		return r
	})
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
	budget := agent.Budget{MaxTokens: 3000}
	send := func(tenant, text string) llm.Request {
		t.Helper()
		before := len(s.Requests())
		m := agent.Message{TenantID: tenant, ConversationID: "c1", Text: text, Budget: budget}
		_, _ = o.HandleMessage(context.Background(), m)
		reqs := s.Requests()
		if len(reqs) <= before {
			t.Fatalf("%s: no model call", tenant)
		}
		return reqs[before]
	}
	if first := send("u1", "Weather in Paris?"); len(first.Tools) == 0 {
		t.Fatal("u1's first message: planned without tools before any report")
	}
	// A longer message: planned at u1's scale, its call with tools and the
	// last call after it could not both fit 3000 tokens.
	if first := send("u2", strings.Repeat("I am planning a trip to Lisbon next week. ", 8)+"Weather in Lisbon?"); len(first.Tools) == 0 {
		t.Fatal("u2's first call was planned from how the model counted u1's text")
	}
	if first := send("u1", "And in Rome?"); len(first.Tools) != 0 {
		t.Fatal("u1's next message forgot how the model counts u1's text")
	}
}
