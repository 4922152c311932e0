package transcript_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/transcript"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

type payIn struct {
	To     string `json:"to"`
	Amount int    `json:"amount"`
}

// pay always asks the user first.
type pay struct{}

func (pay) Run(ctx context.Context, in payIn) (agent.Reply, error) {
	return agent.Reply{Text: fmt.Sprintf("Paid €%d to %s.", in.Amount, in.To)}, nil
}

func (pay) Approval(in payIn) *approval.Request {
	return &approval.Request{ActionSummary: fmt.Sprintf("Pay €%d to %s", in.Amount, in.To)}
}

type cityIn struct {
	City string `json:"city"`
}

// A scripted conversation — a rate-limited call retried, a tool that
// works, one that fails, an Agent-Tool waiting for approval, then the
// approval and the answer — read back from its transcript: each run's
// summary says what its Result said.
func TestTranscriptRoundTrip(t *testing.T) {
	limited := &llm.Error{Kind: llm.KindRateLimited, Message: "slow down"}
	s := llmtest.NewScript(
		llmtest.Fail(limited),
		llmtest.Reply{ToolCalls: []llm.ToolCall{
			llmtest.Call("weather", `{"city":"Paris"}`),
			llmtest.Call("broken", `{"city":"Paris"}`),
			llmtest.Call("pay", `{"to":"Ana","amount":40}`),
		}, Usage: llm.Usage{InputTokens: 100, OutputTokens: 20}},
		llmtest.Reply{Text: "Shall I pay Ana €40?", Usage: llm.Usage{InputTokens: 50, OutputTokens: 10}},
		llmtest.Reply{Text: "Paid Ana €40; Paris is sunny.", Usage: llm.Usage{InputTokens: 200, OutputTokens: 30}},
	)
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "pay", "Pay someone", pay{}); err != nil {
		t.Fatal(err)
	}
	weather := tool.New("weather", "Weather of a city", func(ctx context.Context, in cityIn) (string, error) { return "sunny", nil })
	broken := tool.New("broken", "Always fails", func(ctx context.Context, in cityIn) (string, error) { return "", errors.New("backend down") })
	var out syncBuffer
	obs := newObserver(t, transcript.Config{Writer: &out})
	o := newOrch(t, s, obs, agent.Config{
		Tools: []tool.Tool{weather, broken}, Agents: reg,
		Loop:   agent.LoopConfig{LLMRetryBaseDelay: time.Millisecond, LLMMaxRetryDelay: time.Millisecond},
		Prices: agent.Prices{llmtest.ModelName: {InputPerMillion: 2.5, OutputPerMillion: 10}},
	})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("Weather in Paris, and pay Ana 40"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("first run %+v, %v", first, err)
	}
	second, err := o.HandleMessage(ctx, msg("yes"))
	if err != nil || second.Status != agent.StatusCompleted {
		t.Fatalf("second run %+v, %v", second, err)
	}
	flush(t, obs)

	recs, err := transcript.Read(strings.NewReader(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	runs := transcript.Summarize(recs)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	for i, res := range []*agent.Result{first, second} {
		got := runs[i]
		if got.RunID != res.RunID || got.Tenant != "u1" || got.Conversation != "c1" || !got.Ended || got.Status != string(res.Status) {
			t.Errorf("run %d: %+v, want the run of %+v", i, got, res)
		}
		if got.Turns != res.Turns || got.ToolCalls != len(res.ToolCalls) || got.InputTokens != res.Usage.InputTokens ||
			got.OutputTokens != res.Usage.OutputTokens || got.CostUSD != res.Consumed.CostUSD || got.CostUSD == 0 {
			t.Errorf("run %d: turns %d, tool calls %d, tokens %d/%d, cost %v; the Result says %d, %d, %d/%d, %v",
				i, got.Turns, got.ToolCalls, got.InputTokens, got.OutputTokens, got.CostUSD,
				res.Turns, len(res.ToolCalls), res.Usage.InputTokens, res.Usage.OutputTokens, res.Consumed.CostUSD)
		}
		if got.Duration != res.Duration.Truncate(time.Microsecond) {
			t.Errorf("run %d: duration %v, want %v", i, got.Duration, res.Duration)
		}
		want := map[string]transcript.ToolStats{}
		for _, c := range res.ToolCalls {
			ts := want[c.Name]
			ts.Calls++
			if c.ResultStatus == "error" {
				ts.Errors++
			}
			want[c.Name] = ts
		}
		if fmt.Sprint(got.Tools) != fmt.Sprint(want) {
			t.Errorf("run %d: tools %v, want %v", i, got.Tools, want)
		}
	}
	if r := runs[0]; r.Retries != 1 || r.Tools["broken"].Errors != 1 || r.Tools["pay"].Errors != 0 || len(r.Errors) != 2 {
		t.Errorf("first run: %d retries, tools %v, errors %q", r.Retries, r.Tools, r.Errors)
	}
	if r := runs[1]; r.Tools["pay"] != (transcript.ToolStats{Calls: 1}) {
		t.Errorf("second run: tools %v, want the approved payment", r.Tools)
	}
	var raised, decided int
	for _, r := range recs {
		switch r.Kind {
		case agent.StepApprovalRaised:
			raised++
		case agent.StepApprovalDecided:
			decided++
		}
	}
	if raised != 1 || decided != 1 {
		t.Errorf("%d approvals raised, %d decided; want 1 and 1", raised, decided)
	}
}

// A run whose end is missing (the process died) is summed up from its
// steps.
func TestSummarizeRunWithoutItsEnd(t *testing.T) {
	var out syncBuffer
	obs := newObserver(t, transcript.Config{Writer: &out})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, s := range []agent.Step{
		{Kind: agent.StepRunStart, Message: &agent.Message{Text: "hi"}},
		{Kind: agent.StepModelResponse, Call: 1, Request: llm.Request{Purpose: llm.PurposeLoop}, Response: &llm.Response{Usage: llm.Usage{InputTokens: 7, OutputTokens: 3}}},
		{Kind: agent.StepToolResult, Record: agent.ToolCallRecord{Name: "x", ResultStatus: "error", Error: "boom"}, Err: errors.New("boom")},
	} {
		s.Seq, s.RunID, s.TenantID, s.Time = i+1, "run_1", "u1", t0.Add(time.Duration(i)*time.Second)
		obs.Observe(context.Background(), s)
	}
	flush(t, obs)
	recs, err := transcript.Read(strings.NewReader(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	got := transcript.Summarize(recs)
	if len(got) != 1 {
		t.Fatalf("%d runs", len(got))
	}
	r := got[0]
	if r.Ended || r.Turns != 1 || r.ModelCalls != 1 || r.InputTokens != 7 || r.OutputTokens != 3 || r.ToolCalls != 1 ||
		r.Tools["x"] != (transcript.ToolStats{Calls: 1, Errors: 1}) || r.Duration != 2*time.Second || len(r.Errors) != 1 {
		t.Errorf("summary %+v", r)
	}
}
