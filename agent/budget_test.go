package agent_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// countedWeather is get_weather counting its runs.
func countedWeather(runs *atomic.Int32) tool.Tool {
	return tool.New("get_weather", "Current weather for a city", func(ctx context.Context, in WeatherIn) (string, error) {
		runs.Add(1)
		return "Sunny in " + in.City, nil
	})
}

func weatherCalls(cities ...string) llmtest.Reply {
	var calls []llm.ToolCall
	for _, c := range cities {
		calls = append(calls, llmtest.Call("get_weather", `{"city":"`+c+`"}`))
	}
	return llmtest.Calls(calls...)
}

func hasNote(msgs []llm.Message, text string) bool {
	for _, m := range msgs {
		if m.Role == llm.RoleSystem && strings.HasPrefix(m.Content, text) {
			return true
		}
	}
	return false
}

// A parallel turn crossing the tool-call limit: the first calls within
// the limit run, the others get an error result without running; then
// one last call without tools asks for the answer.
func TestBudgetToolCallsParallelTurnCrossesLimit(t *testing.T) {
	var runs atomic.Int32
	s := llmtest.NewStrictScript(t,
		weatherCalls("Paris", "Rome", "Oslo"),
		weatherCalls("Lima", "Kyiv", "Pune"),
		llmtest.Text("Paris, Rome, Oslo and Lima are sunny; I did not get to Kyiv and Pune."),
	)
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
	m := msg("Weather in six cities?")
	m.Budget = agent.Budget{MaxToolCalls: 4}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || res.Status != agent.StatusCompleted || !res.BudgetExceeded {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	if runs.Load() != 4 || res.Consumed.ToolCalls != 4 {
		t.Fatalf("%d tool runs, Consumed.ToolCalls %d; want 4", runs.Load(), res.Consumed.ToolCalls)
	}
	var statuses []string
	for _, c := range res.ToolCalls {
		statuses = append(statuses, c.ResultStatus)
	}
	if got := strings.Join(statuses, ","); got != "completed,completed,completed,completed,budget_spent,budget_spent" {
		t.Fatalf("statuses = %s", got)
	}
	last := s.Requests()[2]
	if len(last.Tools) != 0 || !hasNote(last.Messages, "The budget for this request is spent") {
		t.Fatalf("the last call has %d tools and no spent note", len(last.Tools))
	}
	// Notes are for the model only.
	h, _ := o.History(context.Background(), "u1", "c1")
	for _, x := range h {
		if x.Role == llm.RoleSystem {
			t.Fatalf("a note reached the history: %q", x.Content)
		}
	}
}

// At 80% of the token budget the model is told to wrap up, and each call's
// MaxTokens is capped at what the budget leaves. (The scripted model
// writes past its MaxTokens; the budget counts what it reports. Its input
// counts are below the estimate, so calls are planned at the estimate.)
func TestBudgetTokensWarnsAt80Percent(t *testing.T) {
	var runs atomic.Int32
	u := llm.Usage{InputTokens: 100, OutputTokens: 1500}
	r1, r2 := weatherCalls("Paris"), weatherCalls("Rome")
	r1.Usage, r2.Usage = u, u
	s := llmtest.NewStrictScript(t, r1, r2, llmtest.Text("Both sunny."))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
	m := msg("Paris and Rome?")
	m.Budget = agent.Budget{MaxTokens: 4000}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || res.BudgetExceeded || res.Response != "Both sunny." {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	reqs := s.Requests()
	if hasNote(reqs[1].Messages, "Most of the budget") || !hasNote(reqs[2].Messages, "Most of the budget") {
		t.Fatal("the wrap-up note is not in the third call only (at 3200 of 4000 tokens)")
	}
	// A call with tools leaves room for a last call without them: it may
	// write at most half of what is left.
	if mt := reqs[2].MaxTokens; mt <= 0 || mt > (4000-3200)/2 {
		t.Fatalf("third call MaxTokens = %d, want capped at half the %d tokens left", mt, 4000-3200)
	}
	if mt := reqs[0].MaxTokens; mt <= 0 || mt > 2000 {
		t.Fatalf("first call MaxTokens = %d", mt)
	}
	if res.Consumed.Tokens != res.Usage.Total() {
		t.Fatalf("Consumed.Tokens = %d, usage %d", res.Consumed.Tokens, res.Usage.Total())
	}
}

// At 100%: the next call with tools cannot be afforded, so one last call
// without tools answers; when even that cannot be afforded the run ends
// with ErrBudgetExceeded, and nothing more is sent.
func TestBudgetTokensSpent(t *testing.T) {
	var runs atomic.Int32
	r1 := weatherCalls("Paris")
	r1.Usage = llm.Usage{InputTokens: 900, OutputTokens: 50}
	t.Run("last call", func(t *testing.T) {
		// A tool whose spec is long (about 500 tokens): a call with tools
		// costs much more than the last call without them.
		long := tool.New("get_weather", "Current weather for a city.\n"+strings.Repeat("Details of the forecast. ", 80), func(ctx context.Context, in WeatherIn) (string, error) {
			return "Sunny", nil
		})
		s := llmtest.NewStrictScript(t, r1, llmtest.Text("Sunny in Paris."))
		o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{long}})
		m := msg("Paris?")
		m.Budget = agent.Budget{MaxTokens: 1250}
		res, err := o.HandleMessage(context.Background(), m)
		if err != nil || !res.BudgetExceeded || res.Status != agent.StatusCompleted {
			t.Fatalf("res = %+v, err = %v", res, err)
		}
		last := s.Requests()[1]
		if len(last.Tools) != 0 || last.MaxTokens <= 0 || last.MaxTokens > 300 {
			t.Fatalf("last call: %d tools, MaxTokens %d", len(last.Tools), last.MaxTokens)
		}
	})
	t.Run("nothing affordable", func(t *testing.T) {
		s := llmtest.NewStrictScript(t, r1)
		o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
		m := msg("Paris?")
		m.Budget = agent.Budget{MaxTokens: 960}
		runs.Store(0)
		res, err := o.HandleMessage(context.Background(), m)
		if !errors.Is(err, agent.ErrBudgetExceeded) || res.Status != agent.StatusError || s.Calls() != 1 {
			t.Fatalf("err = %v, status %s, calls %d", err, res.Status, s.Calls())
		}
		if !strings.Contains(err.Error(), "950 of 960 tokens") {
			t.Fatalf("err = %v, want the figures", err)
		}
	})
}

// Cost is priced per model; a cost budget on a model without a price is
// refused before any call.
func TestBudgetCost(t *testing.T) {
	ctx := context.Background()
	r1 := weatherCalls("Paris")
	r1.Usage = llm.Usage{InputTokens: 1000, OutputTokens: 100}
	t.Run("priced", func(t *testing.T) {
		var runs atomic.Int32
		s := llmtest.NewStrictScript(t, r1, llmtest.Reply{Text: "Sunny.", Usage: llm.Usage{InputTokens: 1000, OutputTokens: 100}})
		prices := agent.Prices{llmtest.ModelName: {InputPerMillion: 100, OutputPerMillion: 1000}} // $0.2 per call
		o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}, Prices: prices})
		m := msg("Paris?")
		m.Budget = agent.Budget{MaxCostUSD: 1}
		res, err := o.HandleMessage(ctx, m)
		if err != nil || res.BudgetExceeded || math.Abs(res.Consumed.CostUSD-0.4) > 1e-9 {
			t.Fatalf("res = %+v, err = %v; want $0.40", res.Consumed, err)
		}
		// $0.20 used of $1: the second call may write at most $0.80 less its input.
		if mt := s.Requests()[1].MaxTokens; mt <= 0 || mt > 800 {
			t.Fatalf("second call MaxTokens = %d", mt)
		}
	})
	t.Run("unpriced", func(t *testing.T) {
		s := llmtest.NewScript(llmtest.Text("never"))
		o := newOrch(t, s, agent.Config{})
		m := msg("Paris?")
		m.Budget = agent.Budget{MaxCostUSD: 1}
		_, err := o.HandleMessage(ctx, m)
		if !errors.Is(err, agent.ErrNoPrice) || s.Calls() != 0 {
			t.Fatalf("err = %v, calls %d", err, s.Calls())
		}
	})
}

// The wall clock: a tool call's timeout is cut to what remains; once it is
// spent the answer comes from one last call.
func TestBudgetWall(t *testing.T) {
	slow := tool.New("get_weather", "weather", func(ctx context.Context, in WeatherIn) (string, error) {
		select {
		case <-time.After(5 * time.Second):
			return "late", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	s := llmtest.NewStrictScript(t, weatherCalls("Paris"), llmtest.Text("I could not check in time."))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{slow}})
	m := msg("Paris?")
	m.Budget = agent.Budget{MaxWall: 100 * time.Millisecond}
	start := time.Now()
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || !res.BudgetExceeded || res.ToolCalls[0].Success {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the run took %v: the tool's timeout was not cut to the budget", d)
	}
}

// LoopConfig.Budget is the default; a message's own Budget replaces it.
func TestBudgetDefaultAndOverride(t *testing.T) {
	var runs atomic.Int32
	s := llmtest.NewStrictScript(t, weatherCalls("Paris", "Rome"), llmtest.Text("done"), weatherCalls("Paris", "Rome"), llmtest.Text("done"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}, Loop: agent.LoopConfig{Budget: agent.Budget{MaxToolCalls: 1}}})
	res, err := o.HandleMessage(context.Background(), msg("two cities"))
	if err != nil || res.Consumed.ToolCalls != 1 || !res.BudgetExceeded {
		t.Fatalf("default budget: %+v, %v", res, err)
	}
	m := msg("two cities again")
	m.Budget = agent.Budget{MaxToolCalls: 10}
	res, err = o.HandleMessage(context.Background(), m)
	if err != nil || res.Consumed.ToolCalls != 2 || res.BudgetExceeded {
		t.Fatalf("message budget: %+v, %v", res, err)
	}
}

// noUsage is a model that reports no usage: the budget falls back to the
// estimate.
type noUsage struct{ *llmtest.Script }

func (n noUsage) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, err := n.Script.Complete(ctx, req)
	if resp != nil {
		resp.Usage = llm.Usage{}
	}
	return resp, err
}

func TestBudgetModelWithoutUsage(t *testing.T) {
	var runs atomic.Int32
	s := llmtest.NewScript(weatherCalls("Paris"), weatherCalls("Rome"), weatherCalls("Oslo"), llmtest.Text("done"))
	o := newOrch(t, noUsage{s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
	res, err := o.HandleMessage(context.Background(), msg("go"))
	if err != nil || res.Usage.Total() != 0 || res.Consumed.Tokens == 0 {
		t.Fatalf("usage %+v, consumed %+v, err %v: want an estimate", res.Usage, res.Consumed, err)
	}
	per := res.Consumed.Tokens / 4
	s2 := llmtest.NewScript(weatherCalls("Paris"), weatherCalls("Rome"), weatherCalls("Oslo"), llmtest.Text("done"))
	o2 := newOrch(t, noUsage{s2}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}})
	m := msg("go")
	m.Budget = agent.Budget{MaxTokens: 2 * per}
	res, err = o2.HandleMessage(context.Background(), m)
	if res.Consumed.Tokens > 2*per || (err == nil && !res.BudgetExceeded) {
		t.Fatalf("estimated budget not enforced: consumed %d of %d, err %v", res.Consumed.Tokens, 2*per, err)
	}
}

func TestBudgetBadInput(t *testing.T) {
	s := llmtest.NewScript(llmtest.Text("never"))
	o := newOrch(t, s, agent.Config{})
	for _, b := range []agent.Budget{{MaxTokens: -1}, {MaxCostUSD: -0.5}, {MaxCostUSD: math.NaN()}, {MaxWall: -time.Second}, {MaxToolCalls: -3}} {
		m := msg("hi")
		m.Budget = b
		if _, err := o.HandleMessage(context.Background(), m); !errors.Is(err, agent.ErrInvalidBudget) {
			t.Fatalf("%+v: err = %v", b, err)
		}
	}
	if s.Calls() != 0 {
		t.Fatal("a model call with an invalid budget")
	}
	for _, cfg := range []agent.Config{
		{Loop: agent.LoopConfig{Budget: agent.Budget{MaxTokens: -1}}},
		{Prices: agent.Prices{"m": {InputPerMillion: -1}}},
		{Prices: agent.Prices{"m": {OutputPerMillion: math.Inf(1)}}},
		{Loop: agent.LoopConfig{NoteRole: llm.RoleTool}},
	} {
		cfg.LLM = s
		if _, err := agent.NewOrchestrator(cfg); !errors.Is(err, agent.ErrInvalidConfig) {
			t.Fatalf("%+v: err = %v", cfg, err)
		}
	}
}

// Notes go with LoopConfig.NoteRole.
func TestNoteRole(t *testing.T) {
	var runs atomic.Int32
	s := llmtest.NewStrictScript(t, weatherCalls("Paris"), llmtest.Text("done"))
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}, Loop: agent.LoopConfig{MaxTurns: 1, NoteRole: llm.RoleUser}})
	if _, err := o.HandleMessage(context.Background(), msg("Paris?")); err != nil {
		t.Fatal(err)
	}
	last := s.Requests()[1].Messages
	if n := last[len(last)-1]; n.Role != llm.RoleUser || !strings.Contains(n.Content, "every step available") {
		t.Fatalf("the max-turns note is %s: %q", n.Role, n.Content)
	}
}

// Source and TaskID reach the Result and the approvals a run raises.
func TestSourceAndTaskCarried(t *testing.T) {
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)), llmtest.Text("Shall I send it?"))
	o := agentsOrch(t, s, agent.Config{}, &emailAgent{}, &noteAgent{})
	m := msg("[Scheduled Task] mail the team")
	m.Source, m.TaskID = agent.SourceTrigger, "task-7"
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil || res.Source != agent.SourceTrigger || res.TaskID != "task-7" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	list, err := o.ListPendingApprovals(context.Background(), "u1")
	if err != nil || len(list) != 1 || list[0].Source != agent.SourceTrigger || list[0].TaskID != "task-7" {
		t.Fatalf("approvals = %+v, %v", list, err)
	}
	plain, _ := newOrch(t, llmtest.NewScript(llmtest.Text("hi")), agent.Config{}).HandleMessage(context.Background(), msg("hi"))
	if plain.Source != agent.SourceUser {
		t.Fatalf("default Source = %q", plain.Source)
	}
}

// A message's Budget replaces only the limits it sets: the operator's
// default token limit still holds for a message that sets only tool calls.
func TestBudgetMessageKeepsDefaultLimits(t *testing.T) {
	var runs atomic.Int32
	r1 := weatherCalls("Paris")
	r1.Usage = llm.Usage{InputTokens: 900, OutputTokens: 50}
	s := llmtest.NewStrictScript(t, r1)
	o := newOrch(t, paired{t, s}, agent.Config{Tools: []tool.Tool{countedWeather(&runs)}, Loop: agent.LoopConfig{Budget: agent.Budget{MaxTokens: 960}}})
	m := msg("Paris?")
	m.Budget = agent.Budget{MaxToolCalls: 10}
	if _, err := o.HandleMessage(context.Background(), m); !errors.Is(err, agent.ErrBudgetExceeded) {
		t.Fatalf("err = %v: the default token limit was dropped", err)
	}
}
