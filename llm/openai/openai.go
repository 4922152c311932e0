package openai

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	oa "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/keyring"
	"github.com/valetkit/valet/internal/llmhttp"
	"github.com/valetkit/valet/llm"
)

// DefaultModel is the model used when [Config.Model] is empty.
const DefaultModel = "gpt-4o-mini"

// DefaultBaseURL is the endpoint used when [Config.BaseURL] is empty.
const DefaultBaseURL = "https://api.openai.com/v1"

// DefaultMaxResponseBytes is the cap on a reply used when
// [Config.MaxResponseBytes] is zero: 8 MiB. The longest replies models give
// today are about 128k output tokens, some 512 KiB of text; JSON escaping
// (up to six bytes for one character) and the reply's framing make that
// at most about 3 MiB on the wire. 8 MiB leaves room above every real reply
// while bounding what one call may hold in memory when a server or proxy
// misbehaves (an endless stream, a huge page where JSON was expected).
const DefaultMaxResponseBytes = 8 << 20

// ErrResponseTooLarge is the cause of the error returned for a reply larger
// than [Config.MaxResponseBytes]: errors.Is(err, ErrResponseTooLarge).
var ErrResponseTooLarge = errors.New("openai: reply too large")

// MaxToolCallsPerReply is the most tool calls one reply may hold, streamed
// or not; a reply with more fails with an *llm.Error of kind
// llm.KindUnknown (not retried) for which errors.Is(err,
// ErrTooManyToolCalls) and errors.Is(err, ErrResponseTooLarge) hold.
//
// 128 is the most tools OpenAI accepts in one request, and real replies
// call far fewer at once (a handful of parallel calls; package agent runs at
// most agent.Config.MaxParallelTools of them at a time anyway). A reply with more
// is a runaway model or a misbehaving server, and every call it holds
// would become a tool run, a tool result in the history and possibly an
// approval. The cap also bounds the work and memory of a reply made of
// tiny calls ("{}" in a body, {"index":N} deltas in a stream), which the
// byte cap alone allows by the hundreds of thousands.
const MaxToolCallsPerReply = 128

// ErrTooManyToolCalls is the cause of the error returned for a reply with
// more than MaxToolCallsPerReply tool calls. It wraps ErrResponseTooLarge:
// a caller that handles oversized replies handles this one too.
var ErrTooManyToolCalls = fmt.Errorf("openai: reply has more than %d tool calls: %w", MaxToolCallsPerReply, ErrResponseTooLarge)

// The environment variables read by [FromEnv].
const (
	EnvAPIKey         = "OPENAI_API_KEY"
	EnvBaseURL        = "OPENAI_BASE_URL"
	EnvModel          = "OPENAI_MODEL"
	EnvEmbeddingModel = "OPENAI_EMBEDDING_MODEL"
)

// Config configures a [Client]. The zero value talks to OpenAI with
// [DefaultModel] and no API key.
type Config struct {
	// Model is the model (or Azure deployment) to call. Default: DefaultModel.
	// A non-empty llm.Request.Model overrides it per call.
	Model string
	// APIKey is sent as "Authorization: Bearer <key>". It may be empty for
	// local servers (Ollama, vLLM); then no Authorization header is sent.
	APIKey string
	// APIKeys are more keys, tried after APIKey in order: a call whose
	// key is refused for quota, rate limit or auth (llm.KindRateLimited,
	// llm.KindAuth) is sent again with the next key at once, and the
	// refused key cools down for KeyCooldown. When every key cools down,
	// the one whose cool-down ends first is used. At most 64 keys in all
	// (the rest are ignored); duplicates count once. Optional. No key is
	// ever printed: String and LogValue give their count, errors are
	// scrubbed of them.
	APIKeys []string
	// KeyCooldown is how long a refused key rests. Default (zero or
	// negative): one minute.
	KeyCooldown time.Duration
	// Clock times KeyCooldown. Default clock.System.
	Clock clock.Clock
	// BaseURL is the API root, the part before "/chat/completions".
	// Default: DefaultBaseURL. Examples: "http://localhost:11434/v1" (Ollama),
	// "http://localhost:8000/v1" (vLLM), "http://localhost:4000" (LiteLLM),
	// "https://RESOURCE.openai.azure.com/openai/deployments/DEPLOYMENT?api-version=2024-10-21"
	// (Azure: a query in BaseURL is sent with every request).
	BaseURL string
	// HTTPClient sends the requests. Default: a client with no overall
	// timeout; the ctx of each call governs how long it may take.
	HTTPClient *http.Client
	// Headers are extra headers sent with every request, e.g. Azure's
	// "api-key". Optional.
	Headers map[string]string
	// MaxResponseBytes caps what is read of one reply: the body of a
	// non-streamed reply; each line and each event of a streamed one; and
	// what a stream accumulates over its chunks (text, refusal, tool-call
	// ids, names and arguments, plus a fixed cost for each call opened). Reading stops at the cap, and the call fails with an
	// *llm.Error of kind llm.KindUnknown (not retried: the same request
	// would bring the same reply) for which errors.Is(err,
	// ErrResponseTooLarge) holds. Error answers (4xx, 5xx) are cut at the
	// cap instead: only their start is used, and their status classifies
	// them. Zero or negative: DefaultMaxResponseBytes. There is no
	// "no limit" value; math.MaxInt64 in effect lifts the cap.
	MaxResponseBytes int64
	// EmbeddingModel is the model [Client.Embed] asks for. Default:
	// DefaultEmbeddingModel. On Azure the deployment is part of BaseURL:
	// embed with a second Client whose BaseURL names the embedding
	// deployment.
	EmbeddingModel string
	// EmbeddingDimensions, when positive, is sent as "dimensions":
	// text-embedding-3 models then return vectors of that length. Zero:
	// the model's own length.
	EmbeddingDimensions int
	// EmbeddingBatchSize is how many texts one embeddings request carries;
	// Embed sends more in several requests, one after the other. Zero or
	// negative: DefaultEmbeddingBatchSize; more than MaxEmbeddingInputs:
	// MaxEmbeddingInputs. Each reply is subject to MaxResponseBytes.
	EmbeddingBatchSize int
}

// String prints the configuration without its secrets.
func (c Config) String() string {
	return fmt.Sprintf("openai.Config{Model: %q, BaseURL: %q, APIKey: %s%s, Headers: %s}",
		c.Model, redactURL(c.BaseURL), llmhttp.Redacted(c.APIKey), keyring.Field(c.APIKeys), llmhttp.HeaderNames(c.Headers))
}

// LogValue logs the configuration without its secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("model", c.Model),
		slog.String("base_url", redactURL(c.BaseURL)),
		slog.String("api_key", llmhttp.Redacted(c.APIKey)),
		slog.String("api_keys", keyring.Redacted(c.APIKeys)),
		slog.String("headers", llmhttp.HeaderNames(c.Headers)),
	)
}

// Client is an [llm.Client] for the OpenAI Chat Completions API and servers
// compatible with it. It is safe for concurrent use.
type Client struct {
	svc     oa.ChatCompletionService
	emb     oa.EmbeddingService
	model   string
	baseURL string
	secrets []string      // the credentials, only to scrub them from error messages
	keys    *keyring.Ring // APIKey and APIKeys when there are several; nil otherwise
	// maxBytes is Config.MaxResponseBytes, or DefaultMaxResponseBytes.
	maxBytes int64
	// completionTokensField is "max_completion_tokens" for OpenAI and Azure,
	// "max_tokens" for other servers.
	completionTokensField string
	// The embeddings settings: Config.EmbeddingModel (or its default),
	// Config.EmbeddingDimensions, Config.EmbeddingBatchSize (or its
	// default, at most MaxEmbeddingInputs).
	embModel string
	embDims  int
	embBatch int
}

var (
	_ llm.Client   = (*Client)(nil)
	_ llm.Embedder = (*Client)(nil)
)

// New returns a Client for cfg. It never fails: a malformed BaseURL is
// reported by the first call.
//
// Unlike openai.NewClient, New reads no environment variables; use
// [FromEnv] for that. openai-go's own retries are off: the caller (the agent
// loop) decides what to retry from the error kind.
func New(cfg Config) *Client {
	if cfg.APIKey == "" && len(cfg.APIKeys) > 0 {
		cfg.APIKey, cfg.APIKeys = cfg.APIKeys[0], cfg.APIKeys[1:]
	}
	model := cfg.Model
	if model == "" {
		model = DefaultModel
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithAPIKey(cfg.APIKey),
	}
	field := "max_tokens"
	if u, err := url.Parse(base); err == nil {
		q := u.Query()
		u.RawQuery, u.Fragment = "", ""
		opts = append(opts, option.WithBaseURL(u.String()))
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, v := range q[k] {
				opts = append(opts, option.WithQueryAdd(k, v))
			}
		}
		h := strings.ToLower(u.Hostname())
		if h == "api.openai.com" || strings.HasSuffix(h, ".openai.azure.com") {
			field = "max_completion_tokens"
		}
	} else {
		opts = append(opts, option.WithBaseURL(base)) // reports the parse error on use
	}
	names := make([]string, 0, len(cfg.Headers))
	for k := range cfg.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		opts = append(opts, option.WithHeader(k, cfg.Headers[k]))
	}
	maxBytes := cfg.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	embBatch := cfg.EmbeddingBatchSize
	if embBatch <= 0 {
		embBatch = DefaultEmbeddingBatchSize
	}
	return &Client{
		svc:                   oa.NewChatCompletionService(opts...),
		emb:                   oa.NewEmbeddingService(opts...),
		maxBytes:              maxBytes,
		model:                 model,
		baseURL:               redactURL(base),
		secrets:               secretsOf(cfg),
		completionTokensField: field,
		embModel:              cmp.Or(cfg.EmbeddingModel, DefaultEmbeddingModel),
		embDims:               max(cfg.EmbeddingDimensions, 0),
		embBatch:              min(embBatch, MaxEmbeddingInputs),
		keys:                  keyring.Of(cfg.APIKey, cfg.APIKeys, cfg.KeyCooldown, cfg.Clock),
	}
}

// FromEnv returns a Client configured from OPENAI_API_KEY (required),
// OPENAI_BASE_URL, OPENAI_MODEL and OPENAI_EMBEDDING_MODEL (optional).
func FromEnv() (*Client, error) {
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		return nil, errors.New("openai: " + EnvAPIKey + " is not set")
	}
	return New(Config{APIKey: key, BaseURL: os.Getenv(EnvBaseURL), Model: os.Getenv(EnvModel),
		EmbeddingModel: os.Getenv(EnvEmbeddingModel)}), nil
}

// Model returns the configured model (the one used when a request names none).
func (c *Client) Model() string { return c.model }

// String describes the client without its secrets: its model, its
// endpoint (redacted like Config.String) and how many keys it holds.
func (c *Client) String() string {
	return fmt.Sprintf("openai.Client{Model: %q, BaseURL: %q, keys: %d}", c.model, redactURL(c.baseURL), c.keyCount())
}

// GoString is String, so %#v shows no secret either.
func (c *Client) GoString() string { return c.String() }

// LogValue logs the client without its secrets.
func (c *Client) LogValue() slog.Value {
	return slog.GroupValue(slog.String("model", c.model), slog.String("base_url", redactURL(c.baseURL)), slog.Int("keys", c.keyCount()))
}

// keyCount is how many API keys the client holds.
func (c *Client) keyCount() int {
	if c.keys != nil {
		return c.keys.Len()
	}
	if len(c.secrets) > 0 {
		return 1
	}
	return 0
}

// BaseURL returns the endpoint the client sends to (DefaultBaseURL when
// Config.BaseURL was empty), redacted like Config.String prints it: the
// userinfo (user name and password) and the values of credential query
// parameters (Azure's "api-key", "key", "token", "sig", "pwd"...; pairs
// after a ';' separator included) are replaced by REDACTED.
func (c *Client) BaseURL() string { return c.baseURL }

// Complete sends req and returns the whole reply.
func (c *Client) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	res, err := c.send(ctx, req, false)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := c.readBody(res.Body)
	if err != nil {
		return nil, c.classify(ctx, failure{err: err})
	}
	var w wireCompletion
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, c.classify(ctx, failure{status: res.StatusCode, header: res.Header, body: body,
			err: fmt.Errorf("openai: decoding response: %w", err), malformed: true})
	}
	if w.hasError() {
		return nil, c.classify(ctx, failure{body: body, inline: true})
	}
	r, err := w.response()
	if err != nil {
		return nil, c.classify(ctx, failure{err: err})
	}
	return r, nil
}

// Stream sends req with "stream": true and yields the reply's text as it
// arrives, then one final chunk carrying the assembled [llm.Response].
// Breaking out of the range closes the HTTP response body.
func (c *Client) Stream(ctx context.Context, req llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(yield func(llm.Chunk, error) bool) {
		res, err := c.send(ctx, req, true)
		if err != nil {
			yield(llm.Chunk{}, err)
			return
		}
		defer res.Body.Close()
		c.readStream(ctx, res, yield)
	}
}

// send builds the request with openai-go and returns the raw response of a
// 2xx answer, or the classified error of anything else.
func (c *Client) send(ctx context.Context, req llm.Request, stream bool) (*http.Response, error) {
	params, opts, err := c.params(req, stream)
	if err != nil {
		return nil, err
	}
	var res *http.Response
	opts = append(opts, option.WithResponseBodyInto(&res), option.WithMiddleware(c.capErrorBody))
	if c.keys == nil {
		_, err = c.svc.New(ctx, params, opts...)
		return c.answer(ctx, res, err)
	}
	return keyring.Send(c.keys, func(key string) (*http.Response, error) {
		res = nil
		_, err := c.svc.New(ctx, params, append(opts[:len(opts):len(opts)], option.WithAPIKey(key))...)
		return c.answer(ctx, res, err)
	})
}

// answer returns res, the raw response openai-go handed over
// (option.WithResponseBodyInto), when it is a 2xx answer, or the
// classified error of anything else: an error answer, or err, the error
// of the exchange.
func (c *Client) answer(ctx context.Context, res *http.Response, err error) (*http.Response, error) {
	if res != nil && res.StatusCode >= 400 {
		// openai-go has read the body (cut at the cap by capErrorBody) and
		// put it back for us; classify it ourselves, whatever shape it has
		// (integer codes, no JSON at all).
		body := llmhttp.ReadErrorBody(res, c.maxBytes)
		return nil, c.classify(ctx, failure{status: res.StatusCode, header: res.Header, body: body})
	}
	if err != nil {
		if res != nil && res.Body != nil {
			res.Body.Close()
		}
		return nil, c.classify(ctx, failure{err: err})
	}
	if res == nil || res.Body == nil {
		return nil, c.classify(ctx, failure{err: errors.New("openai: no response")})
	}
	return res, nil
}

// capErrorBody is an openai-go middleware that cuts the body of an error
// answer (4xx, 5xx) at the cap: openai-go reads such bodies whole itself,
// before the client sees them. Only their start is used, for the message;
// their status classifies them. The body of a 2xx answer is handed to the
// client unread (option.WithResponseBodyInto with an **http.Response), and
// readBody and readStream cap it where they read it.
func (c *Client) capErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	return llmhttp.CapErrorBody(res, err, c.maxBytes)
}

// readBody reads a whole reply body, reading no more than the cap (and one
// byte to know it was passed); past the cap it fails with
// ErrResponseTooLarge.
func (c *Client) readBody(r io.Reader) ([]byte, error) {
	return llmhttp.ReadBody(r, c.maxBytes, ErrResponseTooLarge)
}

// params maps an llm.Request onto openai-go's request parameters.
func (c *Client) params(req llm.Request, stream bool) (oa.ChatCompletionNewParams, []option.RequestOption, error) {
	model := req.Model
	if model == "" {
		model = c.model
	}
	p := oa.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	var opts []option.RequestOption
	for i, m := range req.Messages {
		msg, err := messageParam(m)
		if err != nil {
			return p, nil, &llm.Error{Kind: llm.KindBadRequest, Message: fmt.Sprintf("message %d: %v", i, err)}
		}
		p.Messages = append(p.Messages, msg)
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		if len(bytes.TrimSpace(t.Parameters)) > 0 {
			var schema map[string]any
			dec := json.NewDecoder(bytes.NewReader(t.Parameters))
			dec.UseNumber() // keep numbers as written
			if err := dec.Decode(&schema); err != nil || schema == nil {
				return p, nil, &llm.Error{Kind: llm.KindBadRequest, Message: fmt.Sprintf("tool %q: parameters are not a JSON object", t.Name)}
			}
			fd.Parameters = schema
		} else {
			fd.Parameters = shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		}
		p.Tools = append(p.Tools, oa.ChatCompletionFunctionTool(fd))
	}
	switch req.ToolChoice {
	case llm.ToolChoiceAuto:
	case llm.ToolChoiceNone, llm.ToolChoiceRequired:
		p.ToolChoice = oa.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(string(req.ToolChoice))}
	default:
		p.ToolChoice = oa.ToolChoiceOptionFunctionToolChoice(oa.ChatCompletionNamedToolChoiceFunctionParam{Name: string(req.ToolChoice)})
	}
	if req.Temperature != nil {
		p.Temperature = param.NewOpt(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		if c.completionTokensField == "max_completion_tokens" {
			p.MaxCompletionTokens = param.NewOpt(int64(req.MaxTokens))
		} else {
			p.MaxTokens = param.NewOpt(int64(req.MaxTokens))
		}
	}
	if stream {
		p.StreamOptions = oa.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)}
		opts = append(opts, option.WithJSONSet("stream", true))
	}
	return p, opts, nil
}

func messageParam(m llm.Message) (oa.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case llm.RoleSystem:
		return oa.SystemMessage(m.Content), nil
	case llm.RoleUser:
		return oa.UserMessage(m.Content), nil
	case llm.RoleTool:
		if m.ToolCallID == "" {
			return oa.ChatCompletionMessageParamUnion{}, errors.New("tool message without tool_call_id")
		}
		return oa.ToolMessage(m.Content, m.ToolCallID), nil
	case llm.RoleAssistant:
		a := oa.ChatCompletionAssistantMessageParam{}
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content = oa.ChatCompletionAssistantMessageParamContentUnion{OfString: param.NewOpt(m.Content)}
		}
		for _, tc := range m.ToolCalls {
			args := strings.TrimSpace(string(tc.Arguments))
			if args == "" || args == "null" {
				args = "{}"
			}
			a.ToolCalls = append(a.ToolCalls, oa.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oa.ChatCompletionMessageFunctionToolCallParam{
					ID:       tc.ID,
					Function: oa.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: args},
				},
			})
		}
		return oa.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	}
	return oa.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
}
