package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/valetkit/valet/llm"
)

// callState counts what has been tried for one model call.
type callState struct {
	retries       int // rate-limit and unavailability retries so far
	timeoutRetry  bool
	overflowStage int
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
		resp, err := r.send(req)
		if err == nil {
			r.res.Usage = r.res.Usage.Add(resp.Usage)
			return resp, nil
		}
		if ctxErr := r.ctx.Err(); ctxErr != nil {
			return nil, ctxErr
		}
		h := errorHandlers(llm.KindOf(err))
		if h == nil {
			return nil, err
		}
		if st == nil {
			st = new(callState)
		}
		retry, next, herr := h(r, st, req.Messages, err)
		if !retry {
			return nil, herr
		}
		if next != nil {
			req.Messages = next
		}
		r.o.log.DebugContext(r.ctx, "agent: retrying model call", "kind", llm.KindOf(err).String(), "err", err)
	}
}

func (r *run) send(req llm.Request) (*llm.Response, error) {
	if r.emit == nil {
		return r.o.llm.Complete(r.ctx, req)
	}
	return r.sendStream(req)
}

// sendStream calls the model's Stream and emits text events as they come.
func (r *run) sendStream(req llm.Request) (*llm.Response, error) {
	var (
		final   *llm.Response
		text    strings.Builder
		started bool
	)
	for c, err := range r.o.llm.Stream(r.ctx, req) {
		if err != nil {
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
		return nil, &llm.Error{Kind: llm.KindUnavailable, Message: "stream ended without a final response"}
	}
	if started && !r.emit(Event{Type: EventMessageEnd, Text: text.String()}) {
		return nil, context.Canceled
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
	st.retries++
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

// shrink answers a context overflow by shortening what is sent, one defence
// more each time: trim the history, truncate every tool result, keep only
// the last messages; then it gives up.
func (r *run) shrink(st *callState, msgs []llm.Message, err error) (bool, []llm.Message, error) {
	m := r.o.ctxm
	for st.overflowStage < 3 {
		st.overflowStage++
		before := len(msgs)
		var next []llm.Message
		switch st.overflowStage {
		case 1:
			next = m.Trim(msgs)
		case 2:
			next = m.TruncateToolResults(msgs, 0)
		case 3:
			next = m.ForceTrim(msgs)
		}
		if st.overflowStage == 2 || len(next) != before {
			r.o.log.WarnContext(r.ctx, "agent: context overflow, shortening the conversation",
				"stage", st.overflowStage, "messages_before", before, "messages_after", len(next))
			r.window = next
			return true, next, nil
		}
	}
	return false, nil, fmt.Errorf("%w: %w", ErrContextOverflow, err)
}
