package agent

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/valetkit/valet/llm"
)

// callState counts what has been tried for one model call.
type callState struct {
	retries       int // rate-limit and unavailability retries so far
	timeoutRetry  bool
	overflowStage int           // the last overflow defence tried
	fits          int           // requests fitted to a window the server stated
	delay         time.Duration // the wait before the retry being made (backoff)
	tries         int           // retries made, of every kind
}

// errorHandler decides what to do after a failed model call: retry (after
// changing what it must), or give up with the returned error.
// A handler may replace msgs (what is sent) by returning a non-nil slice.
type errorHandler func(r *run, st *callState, msgs []llm.Message, err error) (retry bool, next []llm.Message, _ error)

// errorHandlers is the one table that maps an error kind to its handling.
// Kinds without an entry (auth, bad request, unknown) are returned at once.
func errorHandlers(kind llm.ErrorKind) errorHandler {
	table := [...]errorHandler{
		llm.KindRateLimited:     (*run).backoff,
		llm.KindUnavailable:     (*run).backoff,
		llm.KindTimeout:         (*run).retryOnce,
		llm.KindContextOverflow: (*run).shrink,
		llm.KindAuth:            nil,
		llm.KindBadRequest:      nil,
		llm.KindUnknown:         nil,
	}
	if int(kind) < 0 || int(kind) >= len(table) {
		return nil
	}
	return table[kind]
}

// callLLM sends req, retrying by error kind. It streams text events when the
// run is streaming. The overflow handler may shorten r.window and req.
func (r *run) callLLM(req llm.Request) (*llm.Response, error) {
	var st *callState // made on the first failure only: the hot path does not allocate it
	for {
		if err := r.ctx.Err(); err != nil {
			return nil, err
		}
		if r.meter != nil {
			if err := r.capCall(&req); err != nil {
				return nil, err
			}
		}
		var settle SettleSpend
		if r.reserver != nil {
			var err error
			if settle, err = r.reserveCall(&req); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		if r.o.obs != nil {
			t0 = r.stepRequest(&req)
		}
		if r.o.tel != nil {
			r.startChat(&req)
		}
		resp, err := r.send(req)
		if r.o.tel != nil {
			r.endChat(&req, resp, err)
		}
		r.logModelCall(&req, resp, err, time.Since(t0)) // DEBUG (runlog_levels.go)
		if r.o.obs != nil {
			r.stepResponse(req.Purpose, resp, err, t0)
		}
		if err == nil {
			r.res.Usage = r.res.Usage.Add(resp.Usage)
			r.noteModel(&req, resp)
			before := r.res.Consumed.CostUSD
			r.account(&req, resp)
			if settle != nil {
				r.settleCall(settle, r.res.Consumed.CostUSD-before)
			}
			return resp, nil
		}
		if settle != nil {
			r.settleCall(settle, 0) // a failed call is not counted (account)
		}
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		h := errorHandlers(llm.KindOf(err))
		if h == nil {
			return nil, err
		}
		if m := r.meter; m != nil && m.b.MaxWall > 0 && m.spent(time.Now()) {
			return nil, noRetry(m, err)
		}
		if st == nil {
			st = new(callState)
		}
		st.delay = 0
		retry, next, herr := h(r, st, req.Messages, err)
		if !retry {
			return nil, herr
		}
		if next != nil {
			req.Messages = next
		}
		st.tries++
		r.noteRetry(st, err)
	}
}

// stepRequest tells the Observer of the model call req and returns when
// the call starts.
//
// The helpers of callLLM keep their temporaries out of its frame, which is
// on the stack while the model answers (see begin in run.go).
//
//go:noinline
func (r *run) stepRequest(req *llm.Request) time.Time {
	r.obs.calls++
	r.step(Step{Kind: StepModelRequest, Call: r.obs.calls, Request: *req})
	return time.Now()
}

// stepResponse tells the Observer how the model call that started at t0
// ended.
//
//go:noinline
func (r *run) stepResponse(purpose llm.Purpose, resp *llm.Response, err error, t0 time.Time) {
	r.step(Step{Kind: StepModelResponse, Call: r.obs.calls, Request: llm.Request{Purpose: purpose}, Response: resp, Err: err, Duration: time.Since(t0)})
}

// noRetry is the error of a failed model call not retried because the
// run's wall-clock budget is spent.
//
//go:noinline
func noRetry(m *meter, err error) error {
	return fmt.Errorf("%w: no retry: %s: %w", ErrBudgetExceeded, m.describe(), err)
}

// noteRetry reports the retry of a model call that failed with err to
// telemetry, the Observer and the log.
//
//go:noinline
func (r *run) noteRetry(st *callState, err error) {
	if r.o.tel != nil {
		r.retryEvent(st, err)
	}
	if r.o.obs != nil {
		r.step(Step{Kind: StepModelRetry, Call: r.obs.calls, Retry: st.tries, ErrorKind: llm.KindOf(err), Err: err, Delay: st.delay})
	}
	r.log().DebugContext(r.ctx, "agent: retrying model call", "kind", llm.KindOf(err).String(), "err", maskText(err.Error()))
}

// callAside makes a model call that is not part of the conversation (an
// approval resolution, a field extraction): its text is not streamed and
// an overflow does not shorten the run's window.
func (r *run) callAside(req llm.Request) (*llm.Response, error) {
	emit := r.emit
	r.emit, r.aside = nil, true
	defer func() { r.emit, r.aside = emit, false }()
	return r.callLLM(req)
}

func (r *run) send(req llm.Request) (*llm.Response, error) {
	ctx := r.chatCtx(r.modelCtx(r.clock.start()))
	resp, err := r.callClient(ctx, req)
	timedOut := r.clock.stop()
	if err == nil && resp == nil {
		err = &llm.Error{Kind: llm.KindUnknown, Message: "the model client returned neither a response nor an error"}
	}
	if err != nil && timedOut && r.ctx.Err() == nil && llm.KindOf(err) != llm.KindTimeout {
		err = &llm.Error{Kind: llm.KindTimeout, Message: "no reply within LLMTimeout " + r.o.loop.LLMTimeout.String(), Err: err}
	}
	return resp, err
}

// callClient calls the model client, turning a panic in it into an error
// of KindUnknown (not retried): the run ends as a failed run, its spans,
// steps and log lines closed, instead of taking the caller down.
func (r *run) callClient(ctx context.Context, req llm.Request) (resp *llm.Response, err error) {
	defer func() {
		if v := recover(); v != nil {
			resp, err = nil, r.clientPanicked(v)
		}
	}()
	if r.emit == nil {
		return r.client().Complete(ctx, req)
	}
	return r.sendStream(ctx, req)
}

// clientPanicked logs a model client's panic (its text masked) and
// returns the error the call fails with.
func (r *run) clientPanicked(v any) error {
	r.log().ErrorContext(r.ctx, "agent: the model client panicked", "panic", maskText(fmt.Sprint(v)), "stack", string(debug.Stack()))
	return &llm.Error{Kind: llm.KindUnknown, Message: "the model client panicked"}
}

// errLLMTimeout is the cause of a model call's ctx when LLMTimeout ran out.
var errLLMTimeout = errors.New("agent: model call exceeded LLMTimeout")

// callClock bounds each model call of a run by LLMTimeout with one context
// and one timer for the whole run, re-armed per call, instead of a new
// context and timer per call. Only a call that really times out costs a
// new pair. It is used by the run's goroutine only.
type callClock struct {
	parent context.Context
	d      time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// start returns the ctx for the next call, with the timer armed.
func (c *callClock) start() context.Context {
	if c.ctx != nil && c.ctx.Err() == nil {
		c.timer.Reset(c.d)
		return c.ctx
	}
	c.close()
	ctx, cancel := context.WithCancelCause(c.parent)
	c.ctx, c.cancel = ctx, cancel
	c.timer = time.AfterFunc(c.d, func() { cancel(errLLMTimeout) })
	return ctx
}

// stop disarms the timer after a call and reports whether it had fired
// (then the next call gets a fresh ctx).
func (c *callClock) stop() (timedOut bool) {
	if c.timer.Stop() {
		return false
	}
	timedOut = context.Cause(c.ctx) == errLLMTimeout || c.ctx.Err() == nil
	c.ctx = nil // the timer fired or is firing: never reuse this ctx
	return timedOut
}

// close releases the ctx and timer at the end of the run.
func (c *callClock) close() {
	if c.cancel != nil {
		c.timer.Stop()
		c.cancel(nil)
		c.ctx, c.cancel, c.timer = nil, nil, nil
	}
}

// sendStream calls the model's Stream and emits text events as they come.
func (r *run) sendStream(ctx context.Context, req llm.Request) (*llm.Response, error) {
	var (
		final   *llm.Response
		text    strings.Builder
		started bool
	)
	r.lastEnd = ""
	for c, err := range r.client().Stream(ctx, req) {
		if err != nil {
			if started && !r.emit(Event{Type: EventMessageRetract, Text: text.String()}) {
				return nil, context.Canceled
			}
			return nil, err
		}
		if c.Text != "" {
			if !started {
				started = true
				if !r.emit(Event{Type: EventMessageStart}) {
					return nil, context.Canceled
				}
			}
			text.WriteString(c.Text)
			if !r.emit(Event{Type: EventMessageChunk, Text: c.Text}) {
				return nil, context.Canceled
			}
		}
		if c.Response != nil {
			final = c.Response
		}
	}
	if final == nil {
		err := &llm.Error{Kind: llm.KindUnavailable, Message: "stream ended without a final response"}
		if started && !r.emit(Event{Type: EventMessageRetract, Text: text.String()}) {
			return nil, context.Canceled
		}
		return nil, err
	}
	if started {
		r.lastEnd = text.String()
		if !r.emit(Event{Type: EventMessageEnd, Text: r.lastEnd}) {
			return nil, context.Canceled
		}
	}
	return final, nil
}

// backoff waits (exponential, or the server's Retry-After when longer) and
// retries up to LLMMaxRetries times.
func (r *run) backoff(st *callState, _ []llm.Message, err error) (bool, []llm.Message, error) {
	cfg := r.o.loop
	if st.retries >= cfg.LLMMaxRetries {
		return false, nil, fmt.Errorf("agent: model call failed after %d retries: %w", st.retries, err)
	}
	d := cfg.LLMRetryBaseDelay << st.retries
	if ra := llm.RetryAfter(err); ra > d {
		d = ra
	}
	d = min(d, cfg.LLMMaxRetryDelay)
	if m := r.meter; m != nil && m.b.MaxWall > 0 {
		if left := m.wallLeft(time.Now()); d >= left {
			return false, nil, fmt.Errorf("%w: no time left for a retry: %s: %w", ErrBudgetExceeded, m.describe(), err)
		}
	}
	st.retries++
	st.delay = d
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.ctx.Done():
		return false, nil, r.ctx.Err()
	case <-t.C:
		return true, nil, nil
	}
}

// retryOnce retries a timed-out call one time.
func (r *run) retryOnce(st *callState, _ []llm.Message, err error) (bool, []llm.Message, error) {
	if st.timeoutRetry {
		return false, nil, fmt.Errorf("agent: model call timed out twice: %w", err)
	}
	st.timeoutRetry = true
	return true, nil, nil
}

// Overflow defences after fitting, tried in this order by shrink.
const (
	overflowTrim     = iota + 1 // trim the history to the configured budget
	overflowTruncate            // cut every tool result to a tenth of its limit
	overflowForce               // keep only the last messages
)

const (
	// overflowMargin is the share of the stated window a fitted request
	// aims for: token estimates differ from the server's count.
	overflowMargin = 0.9
	// maxOverflowFits is how many times a request is fitted to a stated
	// window before the other defences take over.
	maxOverflowFits = 2
	// minFitToolChars is the shortest a fitted request cuts a tool result
	// to before it drops messages instead.
	minFitToolChars = 500
)

// shrink answers a context overflow by sending a shorter request. When the
// server stated its window and the request's size (llm.Error.ContextLimit
// and ContextUsed), the request is shrunk straight to fit, with a margin.
// Otherwise, or when that is not enough, one defence more each time: trim
// the history, truncate every tool result, keep only the last messages;
// then it gives up. A defence whose request would not be strictly smaller
// than the rejected one is skipped: the same request would be rejected
// again.
func (r *run) shrink(st *callState, msgs []llm.Message, err error) (bool, []llm.Message, error) {
	m := r.o.ctxm
	size := m.Tokens(msgs)
	var e *llm.Error
	if st.fits < maxOverflowFits && errors.As(err, &e) && e.ContextLimit > 0 && e.ContextUsed > e.ContextLimit {
		st.fits++
		target := int(float64(size) * float64(e.ContextLimit) / float64(e.ContextUsed) * overflowMargin)
		if next := r.fitTo(msgs, target); m.Tokens(next) < size {
			return r.shortened("fit", msgs, next, size), next, nil
		}
	}
	for st.overflowStage < overflowForce {
		st.overflowStage++
		var next []llm.Message
		switch st.overflowStage {
		case overflowTrim:
			next = m.Trim(msgs)
		case overflowTruncate:
			next = m.TruncateToolResults(msgs, 0)
		case overflowForce:
			next = m.ForceTrim(msgs)
		}
		if m.Tokens(next) < size {
			return r.shortened(overflowStageNames[st.overflowStage], msgs, next, size), next, nil
		}
	}
	return false, nil, fmt.Errorf("%w: %w", ErrContextOverflow, err)
}

var overflowStageNames = [...]string{overflowTrim: "trim", overflowTruncate: "truncate tool results", overflowForce: "keep the last messages"}

// shortened logs a defence that shortened the request and makes next the
// run's window (unless the call is an aside). It returns true: retry.
func (r *run) shortened(how string, msgs, next []llm.Message, size int) bool {
	if r.o.obs != nil {
		r.step(Step{Kind: StepContextShortened, Text: how, Count: len(next)})
	}
	r.log().WarnContext(r.ctx, "agent: context overflow, shortening the conversation",
		"defence", how, "messages_before", len(msgs), "messages_after", len(next),
		"tokens_before", size, "tokens_after", r.o.ctxm.Tokens(next))
	if !r.aside {
		r.setWindow(next)
	}
	return true
}

// fitTo returns msgs shortened to at most target tokens where it can be:
// the oldest messages go first, then every tool result is cut to the
// longest length that fits, then only the last messages are kept.
func (r *run) fitTo(msgs []llm.Message, target int) []llm.Message {
	m := r.o.ctxm
	next := m.TrimToTokens(msgs, target)
	if m.Tokens(next) <= target {
		return next
	}
	longest := 0
	for _, x := range next {
		if x.Role == llm.RoleTool {
			longest = max(longest, len(x.Content))
		}
	}
	if longest > minFitToolChars {
		best, lo, hi := minFitToolChars, minFitToolChars, longest-1
		for lo <= hi { // the longest cut that fits; an error path, so a copy per probe is fine
			mid := lo + (hi-lo)/2
			if m.Tokens(m.TruncateToolResults(next, mid)) <= target {
				best, lo = mid, mid+1
			} else {
				hi = mid - 1
			}
		}
		next = m.TruncateToolResults(next, best)
		if m.Tokens(next) <= target {
			return next
		}
	}
	return m.ForceTrim(next)
}
