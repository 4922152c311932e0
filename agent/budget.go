package agent

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/budget"
	"github.com/valetkit/valet/llm"
)

// Budget bounds one run: the model calls and tool calls one message (or
// one approval decision) causes. It is [budget.Limits] (an alias, so
// trigger.Budget is the same type and a task's budget is a run's as it
// is); a zero field is unlimited. See Message.Budget and
// LoopConfig.Budget. Its Check refuses a negative or non-finite limit,
// wrapping ErrInvalidBudget.
//
// How a run keeps within each limit:
//
//   - MaxTokens caps input plus output tokens of every model call of the
//     run, as the model reports them (estimated when it reports none). A
//     MaxTokens smaller than the smallest call the orchestrator can make
//     (its system prompt and tool specs, as estimated, plus 64 output
//     tokens) is refused: see Orchestrator.CheckBudget.
//   - MaxCostUSD caps the estimated cost of those calls, priced by
//     Config.Prices. A run with a cost limit whose model has no price is
//     refused (ErrNoPrice) before any call: never priced at $0.
//   - MaxWall caps the run's wall clock: checked before each model call;
//     tool calls and Agent-Tools end with it, whatever their own
//     timeouts; a failed model call is not retried past it. The last call
//     that asks for the answer may run past it, by at most LLMTimeout.
//   - MaxToolCalls caps the tool calls run; each call of a parallel turn
//     counts. Calls of a turn past the limit are not run: they get an
//     error result saying the budget is spent.
//
// At 80% of any limit the model gets a note to wrap up. When the next
// model call cannot be afforded, or the tool calls or the wall clock are
// spent, one last call without tools asks for the answer from what was
// gathered (Result.BudgetExceeded, Status completed); when even that
// call cannot be afforded, the run ends with ErrBudgetExceeded. Each model
// call's llm.Request.MaxTokens is capped at what the budget leaves.
//
// Calls are planned before they are made: a call's input is its estimate
// (characters / 4, or Config.CountTokens) scaled by how many times its
// own estimate the input count the model last reported was, when that is
// more than once — a model that counts more tokens than the estimate is
// planned at its own count. That last report is kept across runs, per
// tenant and model (the client's Model() name): a run with a token or cost
// limit plans its first call from what the model reported for the
// tenant's previous run, so a message after the first is not planned from
// the raw estimate; each reported call replaces it. The orchestrator keeps
// it in memory for at most 4096 (tenant, model) pairs (when full, a new
// pair replaces an arbitrary one; a forgotten pair is planned from the
// estimate until its model reports again), one tenant's text (CJK, emoji)
// never scales another's, and a run without a token or cost limit neither
// reads nor writes it. A call is made only when its planned input
// and 64 output tokens fit what is left; a call with tools only when, after
// it, the last call without tools over the same window still would (it
// may write at most half of what is left once both inputs are counted).
// So the tokens and cost a run consumes stay within the budget, over it
// only by what a call's reported input exceeds its plan (when the
// model's count grows faster than the estimate); and a call with tools
// never spends the answer's share: the run ends with ErrBudgetExceeded
// only when what the tools returned makes the last call's window larger
// than what is left.
type Budget = budget.Limits

// Consumed is what a run used (Result.Consumed), and what a SpendGuard
// records. It is [budget.Consumed] (an alias, so trigger.Usage is the
// same type): Tokens is the input plus output tokens of the run's model
// calls (the sum of their llm.Usage.Total, estimated where a model
// reported none); CostUSD their estimated cost, 0 when the model has no
// price and no cost limit was set; Wall the run's wall clock; ToolCalls
// the tool calls run.
type Consumed = budget.Consumed

// Price is what a model costs, in US dollars per million tokens.
type Price struct {
	InputPerMillion  float64
	OutputPerMillion float64
	// CacheReadPerMillion prices the input tokens read from a prompt cache
	// (llm.Usage.CacheReadTokens). Zero: InputPerMillion.
	CacheReadPerMillion float64
	// CacheWritePerMillion prices the input tokens written to a prompt
	// cache (llm.Usage.CacheWriteTokens). Zero: InputPerMillion.
	CacheWritePerMillion float64
}

// Cost returns the price of u: its uncached input at InputPerMillion, its
// cache reads and writes at their own prices, its output at
// OutputPerMillion.
func (p Price) Cost(u llm.Usage) float64 {
	read := cmp.Or(p.CacheReadPerMillion, p.InputPerMillion)
	write := cmp.Or(p.CacheWritePerMillion, p.InputPerMillion)
	return (float64(u.Uncached())*p.InputPerMillion + float64(u.CacheReadTokens)*read +
		float64(u.CacheWriteTokens)*write + float64(u.OutputTokens)*p.OutputPerMillion) / 1e6
}

// Prices maps model names to their prices. A model is found by its exact
// name, or else as a dated snapshot of a name in the table: the name, "-"
// and only digits and dashes ("gpt-4o" prices "gpt-4o-2024-08-06" and
// "gpt-4-0613", not "gpt-4o-mini" or "o3-pro", which are other models).
type Prices map[string]Price

// Lookup returns the price of model.
func (p Prices) Lookup(model string) (Price, bool) {
	if model == "" {
		return Price{}, false
	}
	if pr, ok := p[model]; ok {
		return pr, true
	}
	for i := len(model) - 1; i > 0; i-- {
		if model[i] != '-' {
			continue
		}
		if pr, ok := p[model[:i]]; ok && dated(model[i+1:]) {
			return pr, true
		}
	}
	return Price{}, false
}

// dated reports whether s is a snapshot date: digits and dashes, starting
// with a digit.
func dated(s string) bool {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if (s[i] < '0' || s[i] > '9') && s[i] != '-' {
			return false
		}
	}
	return true
}

// DefaultPrices returns a new table of OpenAI and Anthropic list prices
// (standard tier, per million tokens, as published in 2025; Claude's cache
// writes (5-minute) at 1.25 times and cache reads at 0.1 times the input
// price). They change: set Config.Prices for the models and prices you pay.
func DefaultPrices() Prices {
	return Prices{
		"gpt-4o":       {InputPerMillion: 2.50, OutputPerMillion: 10.00},
		"gpt-4o-mini":  {InputPerMillion: 0.15, OutputPerMillion: 0.60},
		"gpt-4.1":      {InputPerMillion: 2.00, OutputPerMillion: 8.00},
		"gpt-4.1-mini": {InputPerMillion: 0.40, OutputPerMillion: 1.60},
		"gpt-4.1-nano": {InputPerMillion: 0.10, OutputPerMillion: 0.40},
		"gpt-5":        {InputPerMillion: 1.25, OutputPerMillion: 10.00},
		"gpt-5-mini":   {InputPerMillion: 0.25, OutputPerMillion: 2.00},
		"gpt-5-nano":   {InputPerMillion: 0.05, OutputPerMillion: 0.40},
		"o3":           {InputPerMillion: 2.00, OutputPerMillion: 8.00},
		"o4-mini":      {InputPerMillion: 1.10, OutputPerMillion: 4.40},

		"claude-opus-4-5":   claudePrice(5, 25),
		"claude-opus-4-1":   claudePrice(15, 75),
		"claude-opus-4-0":   claudePrice(15, 75),
		"claude-opus-4":     claudePrice(15, 75),
		"claude-sonnet-4-5": claudePrice(3, 15),
		"claude-sonnet-4-0": claudePrice(3, 15),
		"claude-sonnet-4":   claudePrice(3, 15),
		"claude-3-7-sonnet": claudePrice(3, 15),
		"claude-haiku-4-5":  claudePrice(1, 5),
		"claude-3-5-haiku":  claudePrice(0.80, 4),
	}
}

// claudePrice is an Anthropic model's price: cache writes at 1.25 times
// and cache reads at 0.1 times the input price.
func claudePrice(in, out float64) Price {
	return Price{InputPerMillion: in, OutputPerMillion: out, CacheReadPerMillion: in / 10, CacheWritePerMillion: in * 1.25}
}

// notAmount reports whether v is not an amount of money (or a share):
// negative, NaN or infinite.
func notAmount(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }

// checkPrices reports a negative or non-finite price.
func checkPrices(p Prices) error {
	for name, pr := range p {
		for _, v := range [...]float64{pr.InputPerMillion, pr.OutputPerMillion, pr.CacheReadPerMillion, pr.CacheWritePerMillion} {
			if notAmount(v) {
				return fmt.Errorf("%w: the price of %q is %+v", ErrInvalidConfig, name, pr)
			}
		}
	}
	return nil
}

// Budget notes for the model; sent with LoopConfig.NoteRole, never saved.
const (
	budgetWrapUpNote = "Most of the budget for this request is used. Wrap up: answer the user now with what you have, " +
		"and call a tool only if the answer cannot do without it."
	budgetSpentNote = "The budget for this request is spent. Do not call tools. Answer the user now from what was gathered, " +
		"and say briefly what is still missing."
	budgetToolSpent = "This call was not run: the tool-call budget of this request is spent. Answer with what you have."
)

// budgetWarnShare is the share of a limit at which the model is told to
// wrap up.
const budgetWarnShare = 0.8

// budgetReserveTokens is the least output a model call is allowed: a call
// the budget cannot give this many output tokens is not made.
const budgetReserveTokens = 64

// meter enforces a run's Budget. A run without a budget has none: the
// loop's checks are then a nil test.
type meter struct {
	b     Budget
	price Price // of the configured model (a cost limit needs one)
	start time.Time
	used  *Consumed // the run's Result.Consumed
	// reserved is what the run gave background graphs (their Budgets'
	// limits): what its later spawns get is taken from what is neither
	// used nor reserved (run.childBudget). The run's own calls are not
	// held back by it, so it can still answer. mu guards it: spawns of
	// one turn reserve from their goroutines.
	mu       sync.Mutex
	reserved Consumed
	warned   bool
	// scale is how many times the estimate of its request the last input
	// count a model reported was (at least 1; 0 before any report): the
	// estimates of later calls are scaled by it (see plan). A run with a
	// token or cost limit starts from the scale the tenant's earlier runs
	// left (Orchestrator.scales).
	scale float64
	// scales, when the run has a token or cost limit, is where each
	// report's scale is kept for the tenant's later runs, under key.
	scales *usageScales
	key    scaleKey
}

// plan returns the input tokens a call whose input is estimated at est
// is planned with: est scaled by what the model last reported against
// its estimate, so a model that counts more tokens than characters / 4
// (another tokenizer, a hidden prompt) is planned at its own count.
func (m *meter) plan(est int) int {
	if m.scale <= 1 {
		return est
	}
	return int(min(math.Ceil(float64(est)*m.scale), math.MaxInt32))
}

// reported learns from a call whose request was estimated at est input
// tokens and whose model reported input.
func (m *meter) reported(est, input int) {
	if input > 0 && est > 0 {
		m.scale = max(1, float64(input)/float64(est))
		if m.scales != nil {
			m.scales.set(m.key, m.scale)
		}
	}
}

// afford reports whether a call sending input tokens can be made with at
// least budgetReserveTokens of output, and the output cap (0: none).
func (m *meter) afford(input int) (ok bool, maxOut int) {
	maxOut = math.MaxInt
	if m.b.MaxTokens > 0 {
		maxOut = m.b.MaxTokens - m.used.Tokens - input
	}
	if m.b.MaxCostUSD > 0 {
		left := m.b.MaxCostUSD - m.used.CostUSD - m.price.Cost(llm.Usage{InputTokens: input})
		if m.price.OutputPerMillion > 0 {
			// In float first: a huge budget must not overflow int.
			maxOut = min(maxOut, int(min(math.Floor(left/m.price.OutputPerMillion*1e6), math.MaxInt32)))
		} else if left < 0 {
			maxOut = -1
		}
	}
	if maxOut < budgetReserveTokens {
		return false, 0
	}
	if maxOut >= math.MaxInt32 {
		maxOut = 0 // no cap worth sending
	}
	return true, maxOut
}

// spent reports whether the run must stop calling tools: the tool calls
// or the wall clock are used up.
func (m *meter) spent(now time.Time) bool {
	return m.b.MaxToolCalls > 0 && m.used.ToolCalls >= m.b.MaxToolCalls ||
		m.b.MaxWall > 0 && now.Sub(m.start) >= m.b.MaxWall
}

// share returns the largest share of a limit used so far.
func (m *meter) share(now time.Time) float64 {
	s := 0.0
	if m.b.MaxTokens > 0 {
		s = max(s, float64(m.used.Tokens)/float64(m.b.MaxTokens))
	}
	if m.b.MaxCostUSD > 0 {
		s = max(s, m.used.CostUSD/m.b.MaxCostUSD)
	}
	if m.b.MaxWall > 0 {
		s = max(s, float64(now.Sub(m.start))/float64(m.b.MaxWall))
	}
	if m.b.MaxToolCalls > 0 {
		s = max(s, float64(m.used.ToolCalls)/float64(m.b.MaxToolCalls))
	}
	return s
}

// toolsLeft is how many tool calls the budget still allows (MaxInt when
// unlimited).
func (m *meter) toolsLeft() int {
	if m.b.MaxToolCalls == 0 {
		return math.MaxInt
	}
	return max(m.b.MaxToolCalls-m.used.ToolCalls, 0)
}

// wallLeft is how much of the wall clock remains (0: unlimited).
func (m *meter) wallLeft(now time.Time) time.Duration {
	if m.b.MaxWall == 0 {
		return 0
	}
	return max(m.b.MaxWall-now.Sub(m.start), time.Nanosecond)
}

// describe says which limits are reached, for ErrBudgetExceeded.
func (m *meter) describe() string {
	var parts []string
	u := m.used
	if m.b.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d tokens", u.Tokens, m.b.MaxTokens))
	}
	if m.b.MaxCostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f of $%.4f", u.CostUSD, m.b.MaxCostUSD))
	}
	if m.b.MaxToolCalls > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d tool calls", u.ToolCalls, m.b.MaxToolCalls))
	}
	if m.b.MaxWall > 0 {
		parts = append(parts, fmt.Sprintf("%s of %s", time.Since(m.start).Round(time.Millisecond), m.b.MaxWall))
	}
	return "used " + strings.Join(parts, ", ")
}

// startBudget checks the message's Budget and sets up the run's meter.
func (r *run) startBudget() error {
	o := r.o
	b, err := o.runBudget(r.msg.Budget, r.msg.Location)
	if err != nil || b.IsZero() {
		return err
	}
	m := &meter{b: b, start: r.start, used: &r.res.Consumed, price: o.price}
	if b.MaxTokens > 0 || b.MaxCostUSD > 0 {
		// Planned from how the model counted the tenant's text before.
		m.scales, m.key = &o.scales, scaleKey{r.msg.TenantID, r.model()}
		m.scale = m.scales.get(m.key)
	}
	r.meter = m
	if b.MaxWall > 0 {
		// Tools and Agent-Tools, whatever their own timeouts, end with
		// the wall clock.
		r.toolCtx, r.wallCancel = context.WithDeadline(r.ctx, r.start.Add(b.MaxWall))
	}
	return nil
}

// budgetAllows decides, before a model call of the loop, whether the
// budget allows it: not when tool calls or the wall clock are used up or
// the call cannot be afforded. Past budgetWarnShare of a limit it adds the
// wrap-up note once. It caps req.MaxTokens at what the budget leaves.
func (r *run) budgetAllows(req *llm.Request) bool {
	m, now := r.meter, time.Now()
	if m.spent(now) {
		return false
	}
	if !m.warned && m.share(now) >= budgetWarnShare {
		m.warned = true
		r.addNote(budgetWrapUpNote)
		req.Messages = r.window
	}
	// The call with tools is made only when the last call without tools
	// could still follow it: its input is this window (planned without
	// the tools) plus what this call writes, and it needs
	// budgetReserveTokens of output. So this call may write at most half
	// of what is left once both inputs and that reserve are counted.
	w := r.windowTokens(req.Messages)
	ok, maxOut := m.afford(m.plan(w+r.specTokens()) + m.plan(w) + budgetReserveTokens)
	if !ok {
		return false
	}
	if maxOut > 0 {
		if maxOut/2 < budgetReserveTokens {
			return false
		}
		req.MaxTokens = maxOut / 2
	}
	return true
}

// capCall fits a model call to the run's budget (callLLM calls it for
// every call, the loop's and those aside: phrasing, approvals, fields,
// compaction): its MaxTokens is capped at what the budget leaves, and a
// call the budget cannot afford is not made (ErrBudgetExceeded).
func (r *run) capCall(req *llm.Request) error {
	m := r.meter
	input := r.windowTokens(req.Messages)
	if len(req.Tools) > 0 {
		input += toolTokens(r.o, req.Tools)
	}
	ok, maxOut := m.afford(m.plan(input))
	if !ok {
		return fmt.Errorf("%w: %s", ErrBudgetExceeded, m.describe())
	}
	if maxOut > 0 && (req.MaxTokens == 0 || maxOut < req.MaxTokens) {
		req.MaxTokens = maxOut
	}
	return nil
}

// toolTokens estimates the tokens of tools: the orchestrator's own specs
// are counted once, at construction.
func toolTokens(o *Orchestrator, tools []llm.ToolSpec) int {
	if len(tools) == len(o.specs) && len(tools) > 0 && &tools[0] == &o.specs[0] {
		return o.specTokens
	}
	n := 0
	for _, sp := range tools {
		n += o.ctxm.MessageTokens(llm.Message{Content: sp.Name + sp.Description + string(sp.Parameters)})
	}
	return n
}

// windowTokens returns the tokens of msgs, the window: the running total
// when it is the buffer, a count otherwise.
func (r *run) windowTokens(msgs []llm.Message) int {
	if !r.apart && r.buf != nil && len(msgs) == len(r.buf.msgs) {
		return r.sysTokens + r.buf.tokens
	}
	return r.o.ctxm.Tokens(msgs)
}

// addNote adds a note for the model at the end of the window only: it is
// never saved to the history.
func (r *run) addNote(text string) {
	if r.o.obs != nil {
		r.step(Step{Kind: StepNote, Text: text})
	}
	if r.apart {
		r.window = append(r.window, r.note(text))
		return
	}
	w := make([]llm.Message, 0, len(r.window)+1+4) // never in the buffer
	w = append(w, r.window...)
	r.setWindow(append(w, r.note(text)))
}

// account adds one model call to Result.Consumed: its usage, or an
// estimate when the model reports none, priced by the model the response
// names, else the request's, else the client's.
func (r *run) account(req *llm.Request, resp *llm.Response) {
	o := r.o
	// What the model does not report (input, output or both) is
	// estimated, so a budget is never spent unseen.
	u := resp.Usage
	est := r.windowTokens(req.Messages) + toolTokens(o, req.Tools)
	if u.InputTokens == 0 {
		u.InputTokens = est
	} else if m := r.meter; m != nil {
		m.reported(est, u.InputTokens)
	}
	if u.OutputTokens == 0 {
		u.OutputTokens = o.ctxm.MessageTokens(resp.Message)
	}
	c := &r.res.Consumed
	c.Tokens += u.Total()
	price := o.priceOf(req.Model, resp.Model)
	c.CostUSD += price.Cost(u)
	if m := r.meter; m != nil && m.b.MaxCostUSD > 0 {
		// The budget plans with the dearest price seen: a response from
		// another model than the client's is not planned at its price.
		m.price.InputPerMillion = max(m.price.InputPerMillion, price.InputPerMillion)
		m.price.OutputPerMillion = max(m.price.OutputPerMillion, price.OutputPerMillion)
	}
}

// priceOf returns the price of a call: of the model the response names,
// else the request's, else the client's.
func (o *Orchestrator) priceOf(reqModel, respModel string) Price {
	if p, ok := o.prices.Lookup(respModel); ok {
		return p
	}
	if p, ok := o.prices.Lookup(reqModel); ok {
		return p
	}
	return o.price
}
