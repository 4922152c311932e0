package llmtest

import (
	"context"
	"crypto/subtle"
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
	"unicode/utf8"

	"github.com/valetkit/valet/llm"
)

// maxBodyBytes caps the request bodies the server reads.
const maxBodyBytes = 32 << 20

// ServerOption configures a [Server].
type ServerOption func(*serverOptions)

type serverOptions struct {
	maxContextChars int
	apiKey          string
	apiKeys         []string        // WithAPIKeys: more keys accepted
	quota           map[string]bool // WithQuotaExceeded
	latency         time.Duration
	embedder        llm.Embedder
	minCacheTokens  int
}

// WithMinCacheTokens makes an [AnthropicServer] ignore the cache_control
// breakpoints whose prefix is shorter than n tokens, as the Messages API
// does (its minimum is 1,024 tokens for most Claude models, 2,048 or 4,096
// for some). Default 0: every breakpoint caches. A [Server] ignores it.
func WithMinCacheTokens(n int) ServerOption {
	return func(o *serverOptions) { o.minCacheTokens = n }
}

// WithMaxContextChars makes the server answer 400 context_length_exceeded,
// as OpenAI does, whenever the characters of a request's messages (contents
// and tool-call arguments, counted in runes) exceed n. The error message
// counts one token per character. Zero or less means no limit (the default).
func WithMaxContextChars(n int) ServerOption {
	return func(o *serverOptions) { o.maxContextChars = n }
}

// WithAPIKey makes the server require the header "Authorization: Bearer
// key" and answer 401 invalid_api_key, as OpenAI does, otherwise. By default
// any Authorization header, or none, is accepted.
func WithAPIKey(key string) ServerOption {
	return func(o *serverOptions) { o.apiKey = key }
}

// WithAPIKeys makes the server accept any of keys (beside one given to
// WithAPIKey), refusing others as WithAPIKey does: for tests of clients
// that rotate several keys.
func WithAPIKeys(keys ...string) ServerOption {
	return func(o *serverOptions) { o.apiKeys = append(o.apiKeys, keys...) }
}

// WithQuotaExceeded makes the server answer every request made with one
// of keys 429, as a provider does for a key out of quota (OpenAI:
// insufficient_quota; Anthropic: rate_limit_error), whether or not
// WithAPIKey or WithAPIKeys names them.
func WithQuotaExceeded(keys ...string) ServerOption {
	return func(o *serverOptions) {
		if o.quota == nil {
			o.quota = map[string]bool{}
		}
		for _, k := range keys {
			o.quota[k] = true
		}
	}
}

// accepts reports whether key is one WithAPIKey or WithAPIKeys named.
func (o *serverOptions) accepts(key string) bool {
	ok := false
	for _, k := range append([]string{o.apiKey}, o.apiKeys...) {
		if k != "" && subtle.ConstantTimeCompare([]byte(key), []byte(k)) == 1 {
			ok = true
		}
	}
	return ok
}

// WithLatency makes the server wait d before answering every request (on top
// of any [Fault] latency). The wait ends early when the client goes away.
func WithLatency(d time.Duration) ServerOption {
	return func(o *serverOptions) { o.latency = d }
}

// ServerRequest is one HTTP request received by a [Server].
type ServerRequest struct {
	Method string
	Path   string      // URL path, e.g. "/v1/chat/completions"
	Header http.Header // as received, including Authorization
	Body   []byte      // raw body

	// Request is the body of a chat request decoded into an llm.Request;
	// for an invalid body it holds what could be decoded. The wire does not
	// carry llm.Request.Purpose: a request forcing one of the tools of
	// valet's aside calls (resolve_approvals, provide_fields,
	// compact_conversation, remember_facts) gets that call's purpose, any
	// other none.
	Request      llm.Request
	Stream       bool // "stream": true
	IncludeUsage bool // "stream_options": {"include_usage": true}

	// Inputs are the texts of an embeddings request ("input"), as far as
	// they could be decoded.
	Inputs []string

	// Status is the HTTP status the server answered with; 0 while the
	// request is being served, or when a [Fault] with Drop cut the
	// connection before a status was sent; [StatusClientClosedRequest] when
	// the server gave the request up because the client went away (or the
	// server was closed) before an answer.
	Status int
}

// StatusClientClosedRequest is the [ServerRequest].Status of a request the
// client abandoned before it was answered (nginx's 499).
const StatusClientClosedRequest = 499

// Server is a fake OpenAI Chat Completions API on a local httptest server.
// It decodes each POST {URL}/chat/completions into an [llm.Request], asks its
// model (typically a [Script]) for the answer with Complete, and sends the
// answer back in OpenAI's wire format, as one JSON object or, when the
// request says "stream": true, as server-sent events.
//
// It also serves POST {URL}/embeddings, in OpenAI's wire format
// ({"object":"list","data":[{"object":"embedding","index":0,"embedding":[...]}],
// "model":...,"usage":{...}}), with the vectors of an [llm.Embedder]:
// [WithEmbedder], by default a [NewEmbedder](0). It takes "input" as a
// string or an array of strings (at most 2,048, none empty),
// "encoding_format" "float" or "base64", and "dimensions" (the vectors cut
// to that length and scaled back to length 1, as OpenAI does). An
// embedder's error is answered like a model's (below).
//
// Like the real API it rejects invalid requests with 400
// invalid_request_error: malformed JSON, a missing model, no messages, tool
// messages that do not answer the preceding assistant tool calls one for one
// (checked with [llm.CheckPairing]), tool-call arguments that are not a
// string, a tool_choice naming a tool not in tools, and more.
//
// Failures are injected with [Server.Inject] or a model that returns an
// [*llm.Error]: the error kind picks the HTTP status (rate limited → 429
// with Retry-After, context overflow → 400 context_length_exceeded, auth →
// 401, unavailable → 503, bad request → 400, timeout → 504; other errors →
// 500).
//
// Every response carries an x-request-id header. A Server is safe for
// concurrent use; Close it when done (Close ends waits in progress and leaves
// no goroutines behind).
//
// The API itself is a [Handler] ([Server.Handler]), which can also be
// served without a Server, on any address or under a path prefix: see
// [NewHandler].
type Server struct {
	// URL is the base URL of the API, ending in /v1, e.g.
	// "http://127.0.0.1:43127/v1": what an OpenAI client takes as its base
	// URL.
	URL string

	h    *Handler
	ts   *httptest.Server
	once sync.Once
}

// NewServer starts a Server that answers with model, typically a [Script].
func NewServer(model llm.Client, opts ...ServerOption) *Server {
	s := &Server{h: NewHandler(model, opts...)}
	s.ts = httptest.NewServer(s.h)
	s.URL = s.ts.URL + "/v1"
	return s
}

// Close cancels the requests in progress, shuts the server down and waits
// for its handlers to return. It may be called more than once.
func (s *Server) Close() {
	s.once.Do(func() {
		s.h.Close()
		s.ts.Close()
	})
}

// Client returns an HTTP client configured for the server, whose idle
// connections Close closes.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Handler returns the server's API as an [http.Handler], to mount in
// another server as well (it shares the server's model, faults and
// recorded requests).
func (s *Server) Handler() *Handler { return s.h }

// Inject queues faults. Each request to the chat or embeddings endpoint
// that passes the API-key check takes the next queued fault, in order;
// once the queue is empty requests are served normally.
func (s *Server) Inject(faults ...Fault) { s.h.Inject(faults...) }

// PendingFaults returns how many injected faults no request has taken yet.
func (s *Server) PendingFaults() int { return s.h.PendingFaults() }

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []ServerRequest { return s.h.Requests() }

// Handler is the fake OpenAI API of a [Server] as an [http.Handler],
// without a listener of its own, so that it can be served on any address
// or mounted in another server, e.g. beside a frontend under test or for a
// client written in another language:
//
//	h := llmtest.NewHandler(model)
//	mux.Handle("/fake/", http.StripPrefix("/fake", h))
//	// clients use the base URL http://<host>/fake/v1
//
// It serves POST /v1/chat/completions and POST /v1/embeddings (the paths
// it sees, after any prefix is stripped) exactly as a Server does, with the same options,
// [Handler.Inject] faults and [Handler.Requests]; any other path is
// answered 404 like OpenAI's. Faults that cut the connection ([DropStream],
// a wait the client abandons) need a real connection, as in an
// [http.Server] or [httptest.Server]; an [httptest.ResponseRecorder]
// cannot be cut. A Handler is safe for concurrent use.
type Handler struct {
	model    llm.Client
	embedder llm.Embedder
	opts     serverOptions
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	log      exchanges
}

// NewHandler returns a Handler that answers with model, typically a
// [Script].
func NewHandler(model llm.Client, opts ...ServerOption) *Handler {
	h := &Handler{model: model}
	for _, o := range opts {
		o(&h.opts)
	}
	h.embedder = h.opts.embedder
	if h.embedder == nil {
		h.embedder = NewEmbedder(0)
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	return h
}

// Close ends the requests in progress that wait (for latency or for the
// model) by cutting their connections, and every later request the same
// way. It does not wait for them: the server that serves the handler does.
// It may be called more than once.
func (h *Handler) Close() { h.cancel() }

// Inject queues faults. Each request to the chat or embeddings endpoint
// that passes the API-key check takes the next queued fault, in order;
// once the queue is empty requests are served normally.
func (h *Handler) Inject(faults ...Fault) { h.log.inject(faults) }

// PendingFaults returns how many injected faults no request has taken yet.
func (h *Handler) PendingFaults() int { return h.log.pendingFaults() }

// Requests returns every request received so far, in arrival order.
func (h *Handler) Requests() []ServerRequest { return h.log.all() }

// ServeHTTP implements [http.Handler].
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The request ends when its client goes away or the handler is closed.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(h.ctx, cancel)
	defer stop()
	h.serveHTTP(w, r.WithContext(ctx))
}

func (h *Handler) serveHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	seq := h.log.nextSeq()
	w.Header().Set("x-request-id", fmt.Sprintf("req_llmtest%06d", seq))
	body, readErr := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))

	rec := ServerRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	path := strings.TrimSuffix(r.URL.Path, "/")
	isChat := r.Method == http.MethodPost && path == "/v1/chat/completions"
	isEmbed := r.Method == http.MethodPost && path == "/v1/embeddings"
	var d decodedRequest
	var ed embeddingsRequest
	var invalidErr *apiError
	switch {
	case isChat:
		d, invalidErr = decodeRequest(body)
		rec.Request, rec.Stream, rec.IncludeUsage = d.req, d.stream, d.includeUsage
	case isEmbed:
		ed, invalidErr = decodeEmbeddingsRequest(body)
		rec.Inputs = ed.inputs
	}
	idx := h.log.record(rec)

	switch {
	case !isChat && !isEmbed:
		h.writeError(w, idx, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Message: fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path)})
		return
	case readErr != nil:
		h.writeError(w, idx, invalid("", "", invalidJSONMessage))
		return
	}
	if e := h.checkAuth(r); e != nil {
		h.writeError(w, idx, e)
		return
	}
	f := h.log.nextFault()
	if err := wait(ctx, h.opts.latency+f.Latency); err != nil {
		h.log.abandon(w, idx)
		return
	}
	if f.Status != 0 && !f.Drop && f.Body != "" {
		h.log.writeRawFault(w, idx, f)
		return
	}
	if f.Status != 0 && !f.Drop {
		e := f.apiError()
		h.writeError(w, idx, &e)
		return
	}
	if invalidErr != nil {
		h.writeError(w, idx, invalidErr)
		return
	}
	if isEmbed {
		h.serveEmbeddings(ctx, w, idx, ed, f)
		return
	}
	if limit := h.opts.maxContextChars; limit > 0 {
		if n := contextChars(d.req.Messages); n > limit {
			h.writeError(w, idx, invalid("messages", "context_length_exceeded", fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", limit, n)))
			return
		}
	}

	resp, err := h.model.Complete(ctx, d.req)
	if ctx.Err() != nil {
		h.log.abandon(w, idx)
		return
	}
	if err != nil {
		h.writeError(w, idx, modelError(err))
		return
	}
	if resp == nil {
		h.writeError(w, idx, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "llmtest: the model returned no response and no error"})
		return
	}
	a := newAnswer(d, resp, seq)
	if d.stream {
		h.writeStream(ctx, w, idx, a.chunks(d.includeUsage), f)
		return
	}
	if f.Drop {
		abort(w)
		return
	}
	h.writeJSON(w, idx, http.StatusOK, a.completion())
}

// checkAuth enforces WithAPIKey.
func (h *Handler) checkAuth(r *http.Request) *apiError {
	auth := r.Header.Get("Authorization")
	if got, _ := strings.CutPrefix(auth, "Bearer "); h.opts.quota[got] {
		return &apiError{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "insufficient_quota", Message: "You exceeded your current quota, please check your plan and billing details."}
	}
	if h.opts.apiKey == "" && len(h.opts.apiKeys) == 0 {
		return nil
	}
	if auth == "" {
		return &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY). You can obtain an API key from https://platform.openai.com/account/api-keys."}
	}
	got, _ := strings.CutPrefix(auth, "Bearer ")
	if h.opts.accepts(got) && strings.HasPrefix(auth, "Bearer ") {
		return nil
	}
	return &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: "Incorrect API key provided: " + maskKey(got) + ". You can find your API key at https://platform.openai.com/account/api-keys."}
}

// maskKey hides all but the first 3 and last 4 characters of a key, as
// OpenAI does in its 401 message.
func maskKey(k string) string {
	if len(k) < 12 {
		return strings.Repeat("*", len(k))
	}
	return k[:3] + strings.Repeat("*", len(k)-7) + k[len(k)-4:]
}

// contextChars counts the characters WithMaxContextChars limits.
func contextChars(msgs []llm.Message) int {
	n := 0
	for _, m := range msgs {
		n += utf8.RuneCountInString(m.Content)
		for _, c := range m.ToolCalls {
			n += utf8.RuneCount(c.Arguments)
		}
	}
	return n
}

// modelError maps a model failure onto the HTTP error OpenAI would send.
func modelError(err error) *apiError {
	var e *llm.Error
	if !errors.As(err, &e) {
		return &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: "llmtest: the model failed: " + err.Error()}
	}
	f := Fault{Status: e.StatusCode, Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter}
	in := func(lo, hi int) bool { return f.Status >= lo && f.Status <= hi }
	switch e.Kind {
	case llm.KindRateLimited:
		f.Status = http.StatusTooManyRequests
	case llm.KindContextOverflow:
		f = ContextOverflow()
		if e.Code != "" {
			f.Code = e.Code
		}
		if e.Message != "" {
			f.Message = e.Message
		}
	case llm.KindAuth:
		if f.Status != http.StatusForbidden {
			f.Status = http.StatusUnauthorized
		}
	case llm.KindTimeout:
		if f.Status != http.StatusRequestTimeout {
			f.Status = http.StatusGatewayTimeout
		}
	case llm.KindUnavailable:
		if !in(500, 599) {
			f.Status = http.StatusServiceUnavailable
		}
	case llm.KindBadRequest:
		if !in(400, 499) {
			f.Status = http.StatusBadRequest
		}
	default:
		if !in(400, 599) {
			f.Status = http.StatusInternalServerError
		}
	}
	a := f.apiError()
	return &a
}

func (h *Handler) writeError(w http.ResponseWriter, idx int, e *apiError) {
	if e.RetryAfter > 0 {
		secs := (e.RetryAfter + time.Second - 1) / time.Second
		ms := (e.RetryAfter + time.Millisecond - 1) / time.Millisecond
		w.Header().Set("retry-after", strconv.FormatInt(int64(secs), 10))
		w.Header().Set("retry-after-ms", strconv.FormatInt(int64(ms), 10))
	}
	body := wireErrorBody{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		body.Param = &e.Param
	}
	if e.Code != "" {
		body.Code = &e.Code
	}
	h.writeJSON(w, idx, e.Status, wireError{Error: body})
}

func (h *Handler) writeJSON(w http.ResponseWriter, idx, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil { // cannot happen with the wire types
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"llmtest: encoding failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	h.log.setStatus(idx, status)
	_, _ = w.Write(append(b, '\n'))
}

func (h *Handler) writeStream(ctx context.Context, w http.ResponseWriter, idx int, chunks []wireChunk, f Fault) {
	done := h.log.writeSSE(ctx, w, idx, f, len(chunks), func(i int) ([]byte, error) {
		b, err := json.Marshal(chunks[i])
		if err != nil { // cannot happen with the wire types
			return nil, err
		}
		return fmt.Appendf(nil, "data: %s\n\n", b), nil
	})
	if !done {
		return
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
	_ = http.NewResponseController(w).Flush()
}

// abort cuts the connection: what was flushed has been sent, nothing more
// will be (not even the end of a chunked body).
func abort(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler) // net/http closes the connection quietly
}

// answer is a model response ready to be encoded.
type answer struct {
	id, model    string
	created      int64
	text         string
	calls        []wireOutToolCall // full calls, arguments as strings
	finishReason string
	usage        wireUsage
}

func newAnswer(d decodedRequest, resp *llm.Response, seq int) answer {
	a := answer{
		id:           fmt.Sprintf("chatcmpl-llmtest%06d", seq),
		model:        d.req.Model,
		created:      time.Now().Unix(),
		text:         resp.Message.Content,
		finishReason: resp.FinishReason,
		usage:        newWireUsage(resp.Usage),
	}
	if a.model == "" {
		a.model = resp.Model
	}
	if a.model == "" {
		a.model = "llmtest"
	}
	for i, c := range resp.Message.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_llmtest%06d_%d", seq, i)
		}
		args := string(c.Arguments)
		if strings.TrimSpace(args) == "" {
			args = "{}"
		}
		a.calls = append(a.calls, wireOutToolCall{ID: id, Type: "function", Function: wireOutFunction{Name: c.Name, Arguments: args}})
	}
	if a.finishReason == "" {
		a.finishReason = "stop"
		if len(a.calls) > 0 {
			a.finishReason = "tool_calls"
		}
	}
	return a
}

func (a answer) completion() wireCompletion {
	msg := wireOutMessage{Role: "assistant", Annotations: []struct{}{}, ToolCalls: a.calls}
	if a.text != "" || len(a.calls) == 0 {
		msg.Content = &a.text
	}
	u := a.usage
	return wireCompletion{
		ID:          a.id,
		Object:      "chat.completion",
		Created:     a.created,
		Model:       a.model,
		Choices:     []wireChoice{{Index: 0, Message: msg, FinishReason: a.finishReason}},
		Usage:       &u,
		ServiceTier: "default",
	}
}

// chunks returns the data events of a streamed answer, without [DONE].
func (a answer) chunks(includeUsage bool) []wireChunk {
	var out []wireChunk
	add := func(delta wireDelta, finish *string) {
		c := wireChunk{
			ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model, ServiceTier: "default",
			Choices: []wireChunkChoice{{Index: 0, Delta: delta, FinishReason: finish}},
		}
		if includeUsage {
			c.Usage = json.RawMessage("null")
		}
		out = append(out, c)
	}
	first := wireDelta{Role: "assistant", Content: jsonString(""), Refusal: json.RawMessage("null")}
	if a.text == "" && len(a.calls) > 0 {
		first.Content = json.RawMessage("null")
	}
	add(first, nil)
	for _, piece := range splitWords(a.text) {
		add(wireDelta{Content: jsonString(piece)}, nil)
	}
	for i, c := range a.calls {
		index := i
		start := c
		start.Index = &index
		start.Function.Arguments = ""
		add(wireDelta{ToolCalls: []wireOutToolCall{start}}, nil)
		pieces := 3
		if utf8.RuneCountInString(c.Function.Arguments) < 12 {
			pieces = 2
		}
		for _, frag := range splitRunes(c.Function.Arguments, pieces) {
			add(wireDelta{ToolCalls: []wireOutToolCall{{Index: &index, Function: wireOutFunction{Arguments: frag}}}}, nil)
		}
	}
	finish := a.finishReason
	add(wireDelta{}, &finish)
	if includeUsage {
		u, _ := json.Marshal(a.usage)
		out = append(out, wireChunk{
			ID: a.id, Object: "chat.completion.chunk", Created: a.created, Model: a.model, ServiceTier: "default",
			Choices: []wireChunkChoice{}, Usage: u,
		})
	}
	return out
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// The OpenAI Chat Completions wire format, response side.

type wireError struct {
	Error wireErrorBody `json:"error"`
}

type wireErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type wireCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []wireChoice `json:"choices"`
	Usage             *wireUsage   `json:"usage"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint *string      `json:"system_fingerprint"`
}

type wireChoice struct {
	Index        int            `json:"index"`
	Message      wireOutMessage `json:"message"`
	Logprobs     *struct{}      `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

type wireOutMessage struct {
	Role        string            `json:"role"`
	Content     *string           `json:"content"`
	ToolCalls   []wireOutToolCall `json:"tool_calls,omitempty"`
	Refusal     *string           `json:"refusal"`
	Annotations []struct{}        `json:"annotations"`
}

type wireOutToolCall struct {
	Index    *int            `json:"index,omitempty"` // stream deltas only
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function wireOutFunction `json:"function"`
}

type wireOutFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

func newWireUsage(u llm.Usage) wireUsage {
	return wireUsage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.Total()}
}

type wireChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	ServiceTier       string            `json:"service_tier"`
	SystemFingerprint *string           `json:"system_fingerprint"`
	Choices           []wireChunkChoice `json:"choices"`
	Usage             json.RawMessage   `json:"usage,omitempty"` // null on every chunk but the last when include_usage
}

type wireChunkChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type wireDelta struct {
	Role      string            `json:"role,omitempty"`
	Content   json.RawMessage   `json:"content,omitempty"` // a JSON string, or null
	Refusal   json.RawMessage   `json:"refusal,omitempty"`
	ToolCalls []wireOutToolCall `json:"tool_calls,omitempty"`
}
