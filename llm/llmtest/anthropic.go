package llmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/llm"
)

// AnthropicMaxCacheBreakpoints is the most cache_control breakpoints the
// Messages API, and so an [AnthropicServer], accepts in one request.
const AnthropicMaxCacheBreakpoints = 4

// AnthropicServer is a fake Anthropic Messages API on a local httptest
// server. It decodes each POST {URL}/v1/messages into an llm.Request, asks
// its model (typically a [Script]) for the answer with Complete, and sends
// the answer back in Anthropic's wire format, as one JSON message or, when
// the request says "stream": true, as server-sent events (message_start,
// ping, content_block_start / _delta / _stop with text_delta and
// input_json_delta, message_delta, message_stop).
//
// Like the real API it rejects with 400 invalid_request_error a request
// that breaks the API's rules: no anthropic-version header, no model, no
// max_tokens, no messages; roles other than user and assistant, a first
// message that is not the user's, two messages of the same role in a row;
// empty text blocks; a tool_use not answered by a tool_result in the very
// next user message, a tool_result that answers no tool_use of the
// message before it, tool_result blocks after other content; more than
// AnthropicMaxCacheBreakpoints cache_control breakpoints, or one whose
// type is not "ephemeral"; a tool_choice naming no tool.
//
// It accounts for prompt caching as the API does: the prompt is read as
// its blocks in the API's order (tools, system, messages); each
// cache_control breakpoint names the prefix up to and including its block,
// which a request writes to the cache (per API key and model), and a later
// request whose prefix up to a breakpoint, or up to one of the 20 blocks
// before it, was written reads it from the cache. Each reply's usage says
// so like the API's: input_tokens (after the last breakpoint),
// cache_creation_input_tokens and cache_read_input_tokens. A block counts
// one token per 4 bytes of its content (rounded up). Cached prefixes do
// not expire. [AnthropicServer.Usage] sums what the server billed.
//
// Failures are injected with [AnthropicServer.Inject] (the [Fault] values
// of [Server], answered with Anthropic's error bodies: 429
// rate_limit_error with retry-after, 529 overloaded_error, 500 api_error,
// 401 authentication_error...; a Fault whose Code is
// "context_length_exceeded" is Anthropic's "prompt is too long: N tokens >
// M maximum"; a Fault with a Body sends that body as it is) or by a model
// that returns an *llm.Error. A Fault with Drop cuts a stream after
// DropAfter events.
//
// An AnthropicServer is safe for concurrent use; Close it when done.
type AnthropicServer struct {
	// URL is the API root, e.g. "http://127.0.0.1:43127": what the
	// Anthropic client takes as its base URL (the part before
	// "/v1/messages").
	URL string

	model llm.Client
	opts  serverOptions
	ts    *httptest.Server
	ctx   context.Context
	stop  context.CancelFunc
	once  sync.Once

	log exchanges

	mu     sync.Mutex
	cache  map[string]bool // "key\x00model\x00prefix hash"
	billed llm.Usage
}

// NewAnthropicServer starts an AnthropicServer that answers with model.
// Of the ServerOptions it honours WithAPIKey (the key is then required in
// the x-api-key header), WithLatency, WithMaxContextChars (a prompt of
// more tokens than n is refused with "prompt is too long") and
// WithMinCacheTokens.
func NewAnthropicServer(model llm.Client, opts ...ServerOption) *AnthropicServer {
	s := &AnthropicServer{model: model, cache: map[string]bool{}}
	for _, o := range opts {
		o(&s.opts)
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.ts = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.ts.URL
	return s
}

// Close cancels the requests in progress, shuts the server down and waits
// for its handlers to return. It may be called more than once.
func (s *AnthropicServer) Close() {
	s.once.Do(func() {
		s.stop()
		s.ts.Close()
	})
}

// Client returns an HTTP client configured for the server.
func (s *AnthropicServer) Client() *http.Client { return s.ts.Client() }

// Inject queues faults; each request to /v1/messages that passes the
// API-key check takes the next one.
func (s *AnthropicServer) Inject(faults ...Fault) { s.log.inject(faults) }

// PendingFaults returns how many injected faults no request has taken yet.
func (s *AnthropicServer) PendingFaults() int { return s.log.pendingFaults() }

// Requests returns every request received so far, in arrival order.
func (s *AnthropicServer) Requests() []ServerRequest { return s.log.all() }

// Usage returns the sum of the usage of every reply the server sent, in
// llm.Usage's terms: InputTokens counts all input, CacheReadTokens and
// CacheWriteTokens its cached parts; Usage().Uncached() is the input
// billed at the full price.
func (s *AnthropicServer) Usage() llm.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.billed
}

func (s *AnthropicServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	seq := s.log.nextSeq()
	w.Header().Set("request-id", fmt.Sprintf("req_llmtest%06d", seq))
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
	rec := ServerRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	ok := r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == "/v1/messages"
	var d *anthropicRequest
	var bad *anthropicError
	if ok {
		d, bad = decodeAnthropic(body)
		if d != nil {
			rec.Request, rec.Stream = d.req, d.Stream
		}
	}
	idx := s.log.record(rec)

	switch {
	case !ok:
		s.writeError(w, idx, &anthropicError{status: 404, typ: "not_found_error", message: "Not Found"})
		return
	case readErr != nil:
		s.writeError(w, idx, badRequest("could not read the request body"))
		return
	}
	key := r.Header.Get("x-api-key")
	if s.opts.quota[key] {
		s.writeError(w, idx, &anthropicError{status: 429, typ: "rate_limit_error", message: "This request would exceed your organization's rate limit."})
		return
	}
	if s.opts.apiKey != "" || len(s.opts.apiKeys) > 0 {
		if key == "" {
			s.writeError(w, idx, &anthropicError{status: 401, typ: "authentication_error", message: "x-api-key header is required"})
			return
		}
		if !s.opts.accepts(key) {
			s.writeError(w, idx, &anthropicError{status: 401, typ: "authentication_error", message: "invalid x-api-key"})
			return
		}
	}
	f := s.log.nextFault()
	if err := wait(ctx, s.opts.latency+f.Latency); err != nil {
		s.log.abandon(w, idx)
		return
	}
	if f.Status != 0 && !f.Drop {
		s.writeFault(w, idx, f)
		return
	}
	if r.Header.Get("anthropic-version") == "" {
		s.writeError(w, idx, badRequest("anthropic-version: header is required"))
		return
	}
	if bad != nil {
		s.writeError(w, idx, bad)
		return
	}
	u := d.usage(s, key)
	if limit := s.opts.maxContextChars; limit > 0 && u.total > limit {
		s.writeError(w, idx, badRequest(fmt.Sprintf("prompt is too long: %d tokens > %d maximum", u.total, limit)))
		return
	}
	resp, err := s.model.Complete(ctx, d.req)
	if ctx.Err() != nil {
		s.log.abandon(w, idx)
		return
	}
	if err != nil {
		s.writeError(w, idx, anthropicModelError(err))
		return
	}
	if resp == nil {
		s.writeError(w, idx, &anthropicError{status: 500, typ: "api_error", message: "llmtest: the model returned no response and no error"})
		return
	}
	u.commit(s)
	msg := newAnthropicMessage(d, resp, seq, u)
	s.mu.Lock()
	s.billed = s.billed.Add(llm.Usage{
		InputTokens:      msg.Usage.InputTokens + msg.Usage.CacheCreationInputTokens + msg.Usage.CacheReadInputTokens,
		OutputTokens:     msg.Usage.OutputTokens,
		CacheReadTokens:  msg.Usage.CacheReadInputTokens,
		CacheWriteTokens: msg.Usage.CacheCreationInputTokens,
	})
	s.mu.Unlock()
	if d.Stream {
		s.writeStream(ctx, w, idx, msg.events(), f)
		return
	}
	if f.Drop {
		abort(w)
		return
	}
	s.writeJSON(w, idx, http.StatusOK, msg)
}

// anthropicError is an error answer of the Messages API.
type anthropicError struct {
	status     int
	typ        string
	message    string
	retryAfter time.Duration
}

func badRequest(msg string) *anthropicError {
	return &anthropicError{status: 400, typ: "invalid_request_error", message: msg}
}

// anthropicErrorType is the error type the API sends with status.
func anthropicErrorType(status int) (typ, message string) {
	switch status {
	case 400:
		return "invalid_request_error", "Invalid request."
	case 401:
		return "authentication_error", "invalid x-api-key"
	case 402:
		return "billing_error", "Your credit balance is too low to access the Anthropic API."
	case 403:
		return "permission_error", "Your API key does not have permission to use the specified resource."
	case 404:
		return "not_found_error", "Not Found"
	case 413:
		return "request_too_large", "Request exceeds the maximum allowed number of bytes."
	case 429:
		return "rate_limit_error", "This request would exceed the rate limit for your organization of 50 input tokens per minute."
	case 504:
		return "timeout_error", "Request timed out."
	case 529:
		return "overloaded_error", "Overloaded"
	}
	if status >= 500 {
		return "api_error", "Internal server error"
	}
	return "invalid_request_error", http.StatusText(status)
}

// writeFault answers with the error f describes.
func (s *AnthropicServer) writeFault(w http.ResponseWriter, idx int, f Fault) {
	if f.Body != "" {
		s.log.writeRawFault(w, idx, f)
		return
	}
	typ, msg := anthropicErrorType(f.Status)
	if f.Code == "context_length_exceeded" {
		typ, msg = "invalid_request_error", "prompt is too long: 131072 tokens > 128000 maximum"
	}
	if f.Type != "" {
		typ = f.Type
	}
	if f.Message != "" && f.Code != "context_length_exceeded" {
		msg = f.Message
	}
	s.writeError(w, idx, &anthropicError{status: f.Status, typ: typ, message: msg, retryAfter: f.RetryAfter})
}

// anthropicModelError maps a model failure onto the error Anthropic would
// send.
func anthropicModelError(err error) *anthropicError {
	var e *llm.Error
	if !errors.As(err, &e) {
		return &anthropicError{status: 500, typ: "api_error", message: "llmtest: the model failed: " + err.Error()}
	}
	status := 500
	switch e.Kind {
	case llm.KindRateLimited:
		status = 429
	case llm.KindContextOverflow:
		msg := e.Message
		if !strings.Contains(msg, "prompt is too long") {
			msg = fmt.Sprintf("prompt is too long: %d tokens > %d maximum", max(e.ContextUsed, 131072), cmpOr(e.ContextLimit, 128000))
		}
		return badRequest(msg)
	case llm.KindAuth:
		status = 401
		if e.StatusCode == 403 {
			status = 403
		}
	case llm.KindTimeout:
		status = 504
	case llm.KindUnavailable:
		status = 529
		if e.StatusCode >= 500 && e.StatusCode <= 599 {
			status = e.StatusCode
		}
	case llm.KindBadRequest:
		status = 400
		if e.StatusCode >= 400 && e.StatusCode <= 499 {
			status = e.StatusCode
		}
	}
	typ, msg := anthropicErrorType(status)
	if e.Message != "" {
		msg = e.Message
	}
	return &anthropicError{status: status, typ: typ, message: msg, retryAfter: e.RetryAfter}
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

func (s *AnthropicServer) writeError(w http.ResponseWriter, idx int, e *anthropicError) {
	if e.retryAfter > 0 {
		secs := (e.retryAfter + time.Second - 1) / time.Second
		w.Header().Set("retry-after", strconv.FormatInt(int64(secs), 10))
	}
	type body struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	s.writeJSON(w, idx, e.status, struct {
		Type      string `json:"type"`
		Error     body   `json:"error"`
		RequestID string `json:"request_id"`
	}{"error", body{e.typ, e.message}, w.Header().Get("request-id")})
}

func (s *AnthropicServer) writeJSON(w http.ResponseWriter, idx, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen with the wire types
		status, b = 500, []byte(`{"type":"error","error":{"type":"api_error","message":"llmtest: encoding failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	s.log.setStatus(idx, status)
	_, _ = w.Write(b)
}

// writeStream sends events, cutting the connection after f.DropAfter of
// them when f.Drop.
func (s *AnthropicServer) writeStream(ctx context.Context, w http.ResponseWriter, idx int, events []sseEvent, f Fault) {
	s.log.writeSSE(ctx, w, idx, f, len(events), func(i int) ([]byte, error) {
		b, _ := json.Marshal(events[i].data)
		return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", events[i].name, b), nil
	})
}
