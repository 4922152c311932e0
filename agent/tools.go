package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// callOutcome is what one tool call produced.
type callOutcome struct {
	result tool.Result
	dur    time.Duration
	status string // ResultStatus of an Agent-Tool; "" for plain tools
	// wait is an Agent-Tool parked in the pool, or, with wait.sub set, a
	// sub-agent waiting for approval, not parked yet (spawn_park.go).
	wait *Waiting
	// call is a plain tool call bound on the loop's goroutine (bindCall),
	// when bound is set: its arguments already validated and decoded.
	call  tool.Bound
	bound bool
}

// park is the sub-agent waiting for approval that out holds, if any.
func (out *callOutcome) park() *subPark {
	if out.wait == nil {
		return nil
	}
	return out.wait.sub
}

// runTools runs every call of a turn concurrently, each with its own
// timeout, appends one tool message per call to window (in call order, so
// the pairing invariant holds) and records each call. A failure becomes an
// error tool result; the loop goes on.
func (r *run) runTools(calls []llm.ToolCall, usage llm.Usage) {
	o := r.o
	base := r.announceCalls(calls, usage)

	// Calls that keep the default timeout share one deadline for the turn
	// (they all start now); a tool with its own timeout gets its own. The
	// turn's ctx ends with the turn: a tool (or work it started) cannot
	// outlive it, and what tools derive from it ends with
	// context.DeadlineExceeded like the ctx itself.
	timeout, allowed := o.loop.ToolTimeout, len(calls)
	if m := r.meter; m != nil {
		allowed = min(allowed, m.toolsLeft())
		if w := m.wallLeft(time.Now()); w > 0 && w < timeout {
			timeout = w // the run's wall clock ends first
		}
	}
	r.res.Consumed.ToolCalls += allowed
	turnCtx, cancel := context.WithTimeout(r.toolCtx, timeout)
	defer cancel()
	t := r.newTurn(calls, turnCtx, allowed)
	if len(o.callable) > 0 {
		t.at = o.now()
	}
	outs := t.outs
	if o.spawn != nil {
		r.prepareSpawns(calls) // spawn.go
		defer r.addSpawned()
		if r.sub != nil && len(o.callable) > 0 {
			r.planSubAgentTools(calls[:allowed]) // spawn_park.go
		}
	}
	r.classifyCalls(t, calls[:allowed]) // risk.go
	if t.risks != nil && t.at.IsZero() {
		t.at = o.now()
	}
	// The last call runs here, on the loop's goroutine; each other call
	// runs on a goroutine of its own, at most MaxParallelTools-1 at once, so
	// at most MaxParallelTools calls run at once (starting one waits for a
	// free slot). With MaxParallelTools 1 every call runs here, in order.
	last := len(calls) - 1
	if o.loop.MaxParallelTools == 1 {
		for i := range calls {
			t.bindCall(i)
			t.exec(i)
			r.record(base, calls, outs, i)
		}
		last = 0
	} else {
		if last > 0 {
			// One goroutine per call, ending with it: a conversation parked
			// in a slow call holds that call's goroutine and nothing more.
			if cap(t.done) < last {
				t.done = make(chan int, last)
			}
			if last > o.loop.MaxParallelTools-1 && t.slots == nil {
				t.slots = make(chan struct{}, o.loop.MaxParallelTools-1)
			}
			for i := range last {
				if t.slots != nil {
					t.slots <- struct{}{}
				}
				t.bindCall(i)
				go t.spawned(i)
			}
		}
		t.bindCall(last)
		t.exec(last)
		// Record in the order calls finished: first those done before the
		// inline one, then it, then the rest as they come.
		waiting := last
		for drained := false; waiting > 0 && !drained; {
			select {
			case i := <-t.done:
				r.record(base, calls, outs, i)
				waiting--
			default:
				drained = true
			}
		}
		r.record(base, calls, outs, last)
		for ; waiting > 0; waiting-- {
			r.record(base, calls, outs, <-t.done)
		}
	}
	r.pushResults(base, calls, outs)
	clear(outs) // the next turn reuses them: hold no result meanwhile
	*t = turn{outs: outs[:0], done: t.done, slots: t.slots}
}

// announceCalls adds a record for each call to the Result, tells the
// Observer and the stream they start, and returns the index of the first
// record.
//
// announceCalls, pushResults and the helpers of exec are kept out of
// runTools and exec, which stay on the stack while a call runs: their
// temporaries would make every waiting conversation's stack deeper (see
// begin in run.go).
//
//go:noinline
func (r *run) announceCalls(calls []llm.ToolCall, usage llm.Usage) int {
	recs := r.res.ToolCalls
	if recs == nil && r.buf != nil {
		recs = r.buf.recs[:0] // the pooled array (releaseBuffers)
	}
	base := len(recs)
	for _, c := range calls {
		recs = append(recs, ToolCallRecord{ID: c.ID, Name: c.Name, ArgsSummary: summarizeArgs(c.Arguments), Usage: usage})
	}
	r.res.ToolCalls = recs
	if r.o.obs != nil {
		for _, c := range calls {
			r.step(Step{Kind: StepToolCall, ToolCall: c})
		}
	}
	if r.emit != nil {
		for i := range calls {
			rec := recs[base+i]
			r.emit(Event{Type: EventToolCallStart, ToolCall: &rec})
		}
	}
	return base
}

// pushResults appends one tool message per call to the window, in call
// order, and keeps the Agent-Tools and sub-agents the calls parked.
//
//go:noinline
func (r *run) pushResults(base int, calls []llm.ToolCall, outs []callOutcome) {
	for i, c := range calls {
		if w := outs[i].wait; w != nil {
			if w.sub != nil {
				r.notePark(base, calls, outs, i) // spawn_park.go
			} else {
				r.addParked(*w)
			}
		}
		r.push(llm.Message{
			Role: llm.RoleTool, ToolCallID: c.ID, Name: c.Name,
			Content: outs[i].result.Content, IsError: outs[i].result.IsError,
		})
	}
}

// turn is the state the calls of one turn share, with methods instead of
// closures for its goroutines. A run keeps one (run.turnSt) and reuses it,
// its outcomes and its channels from turn to turn (newTurn): every
// goroutine of a turn has ended when runTools returns, and the channels
// are empty then.
type turn struct {
	r     *run
	calls []llm.ToolCall
	outs  []callOutcome
	ctx   context.Context // the turn's deadline
	creds credentials.Store
	at    time.Time // when agents of this turn are parked: in call order, a nanosecond apart
	// done receives the index of each call run on its own goroutine, when
	// it ends; slots bounds those goroutines to MaxParallelTools-1, nil when
	// unbounded. Both are made on first need and kept for the next turns.
	done  chan int
	slots chan struct{}
	// allowed is how many calls the budget lets run, the first ones in
	// call order; the others get an error result.
	allowed int
	// risks are the risk checks of the allowed calls (risk.go); nil when
	// all are low risk.
	risks []riskVerdict
}

// newTurn readies the run's turn for calls, the first allowed of which
// may run, under ctx.
func (r *run) newTurn(calls []llm.ToolCall, ctx context.Context, allowed int) *turn {
	t := &r.turnSt
	outs := t.outs[:0]
	if cap(outs) < len(calls) {
		outs = make([]callOutcome, 0, len(calls))
	}
	outs = outs[:len(calls)]
	clear(outs)
	*t = turn{r: r, calls: calls, outs: outs, ctx: ctx, creds: r.credentials(), allowed: allowed, done: t.done, slots: t.slots}
	return t
}

// spawned runs call i on its own goroutine.
//
// A plain tool call arrives bound (bindCall): its arguments were validated
// and decoded on the loop's goroutine, whose stack is already deep, so this
// goroutine's stack holds only execBound, Run and the tool's own frames
// while the tool waits: it grows to 4 KB up front, not 8 (stack.go). Other
// calls (Agent-Tools, sub-agents, tools not made by tool.New, whose Call
// decodes) grow it to 8 KB first.
func (t *turn) spawned(i int) {
	if out := &t.outs[i]; out.bound && out.call.Decoded() {
		growBoundStack(i)
		t.execBound(i, out)
	} else {
		growStack(i)
		t.exec(i)
	}
	if t.slots != nil {
		<-t.slots
	}
	t.done <- i
}

// exec runs call i and stores its outcome.
func (t *turn) exec(i int) {
	out := &t.outs[i]
	switch {
	case out.bound:
		t.execBound(i, out)
	case i >= t.allowed:
		spentCall(out)
	case t.r.o.tel != nil:
		t.execTraced(i, out)
	default:
		t.execCall(i, toolTel{}, out)
	}
}

// execTraced runs call i in its execute_tool span.
//
//go:noinline
func (t *turn) execTraced(i int, out *callOutcome) {
	r, c := t.r, &t.calls[i]
	tt := r.startTool(*c, false)
	defer r.endTool(tt, c.Name, out)
	t.execCall(i, tt, out)
}

// execCall runs call i, whose span is tt: a sub-agent, an Agent-Tool, or
// a plain tool once its risk allows it.
func (t *turn) execCall(i int, tt toolTel, out *callOutcome) {
	o, c := t.r.o, &t.calls[i]
	if o.spawn != nil && t.r.spawnHandles(*c) {
		t.execSpawn(c, tt, out)
		return
	}
	if len(o.callable) > 0 {
		if a := o.callable[c.Name]; a != nil {
			t.execAgent(a, i, out)
			return
		}
	}
	if t.risks != nil && t.riskGate(i, *c, tt, out) {
		return // denied, or waiting for the user's approval (risk.go)
	}
	// A plain call bindCall did not bind (it binds every call that gets
	// here): bind it now.
	out.call, out.bound = t.r.tools().Bind(*c), true
	t.runBound(i, tt, out)
}

// spentCall is the outcome of a call the run's tool-call budget does not
// let run.
//
//go:noinline
func spentCall(out *callOutcome) {
	*out = callOutcome{result: tool.Result{Content: budgetToolSpent, IsError: true}, status: resultBudgetSpent}
}

// execSpawn runs the spawn_agent call c (spawn.go).
//
//go:noinline
func (t *turn) execSpawn(c *llm.ToolCall, tt toolTel, out *callOutcome) {
	r := t.r
	t0 := time.Now()
	*out = r.spawnCall(tt.ctx(r.toolCtx), *c)
	out.dur = time.Since(t0)
	r.markInterrupted(*c, out)
}

// execAgent starts the Agent-Tool a for call i.
//
//go:noinline
func (t *turn) execAgent(a *agentTool, i int, out *callOutcome) {
	r, c := t.r, t.calls[i]
	t0 := time.Now()
	*out = r.startAgent(a, c, t.at.Add(time.Duration(i)))
	out.dur = time.Since(t0)
	r.markInterrupted(c, out)
}

// bindCall binds call i on the loop's goroutine when it is a plain tool
// call that runs: one the budget allows, not a sub-agent nor an Agent-Tool,
// not denied or parked by the risk policy (those go through execCall). Its
// arguments are validated and decoded here, where the stack is already
// deep, and not on the goroutine that runs it (spawned).
//
//go:noinline
func (t *turn) bindCall(i int) {
	r, o, c := t.r, t.r.o, &t.calls[i]
	if i >= t.allowed || o.spawn != nil && r.spawnHandles(*c) || len(o.callable) > 0 && o.callable[c.Name] != nil {
		return
	}
	if t.risks != nil {
		if v := t.risks[i]; v.classified && (v.decision == RiskDenied || v.decision == RiskParked) {
			return
		}
	}
	out := &t.outs[i]
	out.call, out.bound = r.tools().Bind(*c), true
}

// execBound runs the plain tool call i, bound by bindCall, in its span.
// Its frame is all the loop keeps on a call's goroutine while the tool runs
// (beside Bound.Run's): what it needs before and after the call is done in
// helpers.
func (t *turn) execBound(i int, out *callOutcome) {
	var tt toolTel
	if t.r.o.tel != nil || t.risks != nil {
		tt = t.openBound(i)
	}
	ctx := t.boundCtx(i, tt)
	t0 := time.Now()
	out.result = out.call.Run(ctx, 0)
	out.dur = time.Since(t0)
	t.boundDone(i, tt, t.r.o.tel != nil, out)
}

// openBound opens the span of the bound call i and logs its risk verdict.
//
//go:noinline
func (t *turn) openBound(i int) toolTel {
	var tt toolTel
	if t.r.o.tel != nil {
		tt = t.r.startTool(t.calls[i], false)
	}
	if t.risks != nil {
		t.riskGate(i, t.calls[i], tt, &t.outs[i]) // logs a medium risk; never stops a bound call
	}
	return tt
}

// runBound runs call i, bound late by execCall, with its deadline and the
// ExecContext of the run, in the span tt that execTraced opened.
func (t *turn) runBound(i int, tt toolTel, out *callOutcome) {
	ctx := t.boundCtx(i, tt)
	t0 := time.Now()
	out.result = out.call.Run(ctx, 0)
	out.dur = time.Since(t0)
	t.boundDone(i, tt, false, out) // execTraced closes the span
}

// boundCtx is the ctx call i runs with: the turn's deadline, or the run's
// when the tool has a timeout of its own (Run applies it), carrying the
// call's span and ExecContext.
//
//go:noinline
func (t *turn) boundCtx(i int, tt toolTel) context.Context {
	r, c := t.r, &t.calls[i]
	parent := t.ctx
	if tl, ok := r.tools().Get(c.Name); ok && tool.SettingsOf(tl).Timeout > 0 {
		parent = r.toolCtx
	}
	return tool.WithExecContext(tt.ctx(parent), tool.ExecContext{
		TenantID:       r.msg.TenantID,
		ConversationID: r.msg.ConversationID,
		CallID:         c.ID,
		Credentials:    t.creds,
		Logger:         r.log(),
	})
}

// boundDone masks secrets in the result of call i, says what stopped it
// when a deadline did, and with end closes its span tt.
//
//go:noinline
func (t *turn) boundDone(i int, tt toolTel, end bool, out *callOutcome) {
	r, c := t.r, &t.calls[i]
	out.status, out.wait = "", nil
	r.scrubToolResult(&out.result)
	if out.result.IsError && r.ctx.Err() == nil && errors.Is(out.result.Err, context.DeadlineExceeded) {
		t.stoppedTool(c, out)
	}
	r.markInterrupted(*c, out)
	if end {
		r.endTool(tt, c.Name, out)
	}
}

// stoppedTool says in the result of call c, which ended with the deadline
// of its turn or of the run, which one stopped it.
//
//go:noinline
func (t *turn) stoppedTool(c *llm.ToolCall, out *callOutcome) {
	r := t.r
	switch {
	case r.toolCtx.Err() != nil:
		out.result.Content = fmt.Sprintf("tool %q was stopped: the time budget of this request ran out", c.Name)
	case t.ctx.Err() == context.DeadlineExceeded:
		out.result.Content = fmt.Sprintf("tool %q timed out after %s", c.Name, r.o.loop.ToolTimeout)
	}
}

// resultInterrupted is the ResultStatus of a call stopped because the run
// was cancelled; resultBudgetSpent of a call not run because the run's
// tool-call budget was spent.
const (
	resultInterrupted = "interrupted"
	resultBudgetSpent = "budget_spent"
)

// markInterrupted turns the failure of a call that the run's cancellation
// stopped into an interrupted result: the model reads that the call did not
// finish (it may have partly taken effect), not that it failed.
func (r *run) markInterrupted(c llm.ToolCall, out *callOutcome) {
	if !out.result.IsError || r.ctx.Err() == nil {
		return
	}
	out.result.Content = fmt.Sprintf("tool %q was interrupted: the request was cancelled before the call finished, so it may or may not have taken effect", c.Name)
	out.status = resultInterrupted
}

// record fills the telemetry of call i once it has finished, truncates its
// result to its share of the context window, and emits EventToolResult.
func (r *run) record(base int, calls []llm.ToolCall, outs []callOutcome, i int) {
	out := &outs[i]
	rec := &r.res.ToolCalls[base+i]
	rec.Duration = out.dur
	rec.Success = !out.result.IsError
	rec.ResultChars = len(out.result.Content)
	rec.Attempts = out.result.Attempts
	switch {
	case out.status != "":
		rec.ResultStatus = out.status
		if out.result.IsError {
			rec.Error = out.result.Content
		}
	case out.result.IsError:
		rec.ResultStatus = "error"
		rec.Error = out.result.Content
	default:
		rec.ResultStatus = "completed"
	}
	out.result.Content, rec.Truncated = r.o.ctxm.TruncateToolResult(out.result.Content)
	if r.o.obs != nil {
		r.step(Step{Kind: StepToolResult, ToolCall: calls[i], Record: *rec, Text: out.result.Content, Err: out.result.Err, Duration: out.dur})
	}
	r.logToolResult(rec) // WARN on failure, DEBUG otherwise (runlog_levels.go)
	if r.emit != nil {
		cp := *rec
		r.emit(Event{Type: EventToolResult, ToolCall: &cp})
	}
}
