package anthropic

import (
	"bytes"
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
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/internal/keyring"
	"github.com/valetkit/valet/internal/llmhttp"
	"github.com/valetkit/valet/llm"
)

// DefaultModel is the model used when [Config.Model] is empty.
const DefaultModel = "claude-sonnet-4-5"

// DefaultBaseURL is the endpoint used when [Config.BaseURL] is empty.
const DefaultBaseURL = "https://api.anthropic.com"

// DefaultMaxTokens is the reply cap sent as max_tokens (which the Messages
// API requires) when neither the request nor [Config.MaxTokens] sets one.
const DefaultMaxTokens = 4096

// DefaultMaxResponseBytes is the cap on a reply used when
// [Config.MaxResponseBytes] is zero: 8 MiB, far above the longest real
// reply.
const DefaultMaxResponseBytes = 8 << 20

// MaxCacheBreakpoints is the most cache_control breakpoints the Messages API
// accepts in one request; the client places at most this many.
const MaxCacheBreakpoints = 4

// ErrResponseTooLarge is the cause of the error returned for a reply larger
// than [Config.MaxResponseBytes]: errors.Is(err, ErrResponseTooLarge).
var ErrResponseTooLarge = errors.New("anthropic: reply too large")

// The environment variables read by [FromEnv].
const (
	EnvAPIKey  = "ANTHROPIC_API_KEY"
	EnvBaseURL = "ANTHROPIC_BASE_URL"
	EnvModel   = "ANTHROPIC_MODEL"
)

// Config configures a [Client]. The zero value talks to Anthropic with
// [DefaultModel], no API key and prompt caching on.
type Config struct {
	// Model is the model to call. Default: DefaultModel. A non-empty
	// llm.Request.Model overrides it per call.
	Model string
	// APIKey is sent as the "x-api-key" header. Default: none (no header is
	// sent; New never reads ANTHROPIC_API_KEY, FromEnv does).
	APIKey string
	// APIKeys are more keys, tried after APIKey in order: a call whose
	// key is refused for quota, rate limit or auth (llm.KindRateLimited,
	// llm.KindAuth) is sent again with the next key at once, and the
	// refused key cools down for KeyCooldown. When every key cools down,
	// the one whose cool-down ends first is used. At most 64 keys in all
	// (the rest are ignored); duplicates count once. Default: none. No
	// key is ever printed: String and LogValue give their count, errors
	// are scrubbed of them.
	APIKeys []string
	// KeyCooldown is how long a refused key rests. Default (zero or
	// negative): one minute.
	KeyCooldown time.Duration
	// Clock times KeyCooldown. Default clock.System.
	Clock clock.Clock
	// BaseURL is the API root, the part before "/v1/messages".
	// Default: DefaultBaseURL.
	BaseURL string
	// HTTPClient sends the requests. Default: a client with no overall
	// timeout; the ctx of each call governs how long it may take.
	HTTPClient *http.Client
	// Headers are extra headers sent with every request, e.g.
	// "anthropic-beta". Default: none.
	Headers map[string]string
	// MaxTokens is sent as max_tokens when a request does not set
	// llm.Request.MaxTokens. Default: DefaultMaxTokens.
	MaxTokens int
	// MaxResponseBytes caps what is read of one reply (a whole body, each
	// event of a stream, and the text and tool calls a stream
	// accumulates); past it the call fails with an *llm.Error of kind
	// llm.KindUnknown for which errors.Is(err, ErrResponseTooLarge) holds.
	// Default (zero or negative): DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// DisableCaching turns automatic prompt caching off: no cache_control
	// breakpoint is sent. Default: false (caching on; see the package
	// documentation).
	DisableCaching bool
}

// String prints the configuration without its secrets.
func (c Config) String() string {
	return fmt.Sprintf("anthropic.Config{Model: %q, BaseURL: %q, APIKey: %s%s, Headers: %s, DisableCaching: %v}",
		c.Model, redactURL(c.BaseURL), llmhttp.Redacted(c.APIKey), keyring.Field(c.APIKeys), llmhttp.HeaderNames(c.Headers), c.DisableCaching)
}

// LogValue logs the configuration without its secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("model", c.Model),
		slog.String("base_url", redactURL(c.BaseURL)),
		slog.String("api_key", llmhttp.Redacted(c.APIKey)),
		slog.String("api_keys", keyring.Redacted(c.APIKeys)),
		slog.String("headers", llmhttp.HeaderNames(c.Headers)),
		slog.Bool("disable_caching", c.DisableCaching),
	)
}

// redactURL hides the userinfo (user name and password) and the query
// values of a URL: a proxy's credentials may be there.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if raw == "" {
			return ""
		}
		return "REDACTED"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Client is an [llm.Client] for Anthropic's Messages API. It is safe for
// concurrent use.
type Client struct {
	svc       sdk.MessageService
	model     string
	baseURL   string
	maxTokens int
	maxBytes  int64
	caching   bool
	secrets   []string      // only to scrub them from error messages
	keys      *keyring.Ring // APIKey and APIKeys when there are several; nil otherwise
}

var _ llm.Client = (*Client)(nil)

// New returns a Client for cfg. It never fails: a malformed BaseURL is
// reported by the first call.
//
// Unlike the SDK's anthropic.NewClient, New reads no environment variables
// nor credential files; use [FromEnv] for the environment. The SDK's own
// retries are off: the caller (the agent loop) decides what to retry from
// the error kind.
func New(cfg Config) *Client {
	if cfg.APIKey == "" && len(cfg.APIKeys) > 0 {
		cfg.APIKey, cfg.APIKeys = cfg.APIKeys[0], cfg.APIKeys[1:]
	}
	c := &Client{
		model:     cfg.Model,
		baseURL:   cfg.BaseURL,
		maxTokens: cfg.MaxTokens,
		maxBytes:  cfg.MaxResponseBytes,
		caching:   !cfg.DisableCaching,
	}
	if c.model == "" {
		c.model = DefaultModel
	}
	if c.baseURL == "" {
		c.baseURL = DefaultBaseURL
	}
	if c.maxTokens <= 0 {
		c.maxTokens = DefaultMaxTokens
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxResponseBytes
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	opts := []option.RequestOption{
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0),
		option.WithBaseURL(c.baseURL),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
		c.secrets = append(c.secrets, cfg.APIKey)
	}
	for _, k := range cfg.APIKeys {
		if k != "" {
			c.secrets = append(c.secrets, k)
		}
	}
	c.keys = keyring.Of(cfg.APIKey, cfg.APIKeys, cfg.KeyCooldown, cfg.Clock)
	if u, err := url.Parse(c.baseURL); err == nil {
		if p, ok := u.User.Password(); ok && p != "" {
			c.secrets = append(c.secrets, p)
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				if len(v) >= 8 {
					c.secrets = append(c.secrets, v)
				}
			}
		}
	}
	names := make([]string, 0, len(cfg.Headers))
	for k := range cfg.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		opts = append(opts, option.WithHeader(k, cfg.Headers[k]))
		if v := cfg.Headers[k]; len(v) >= 8 {
			c.secrets = append(c.secrets, v)
		}
	}
	c.svc = sdk.NewMessageService(opts...)
	return c
}

// FromEnv returns a Client configured from ANTHROPIC_API_KEY (required),
// ANTHROPIC_BASE_URL and ANTHROPIC_MODEL (optional).
func FromEnv() (*Client, error) {
	key := os.Getenv(EnvAPIKey)
	if key == "" {
		return nil, errors.New("anthropic: " + EnvAPIKey + " is not set")
	}
	return New(Config{APIKey: key, BaseURL: os.Getenv(EnvBaseURL), Model: os.Getenv(EnvModel)}), nil
}

// Model returns the configured model (the one used when a request names none).
func (c *Client) Model() string { return c.model }

// String describes the client without its secrets: its model, its
// endpoint (redacted like Config.String) and how many keys it holds.
func (c *Client) String() string {
	return fmt.Sprintf("anthropic.Client{Model: %q, BaseURL: %q, keys: %d}", c.model, redactURL(c.baseURL), c.keyCount())
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
	var w wireResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, c.classify(ctx, failure{status: res.StatusCode, body: body, malformed: true,
			err: fmt.Errorf("anthropic: decoding response: %w", err)})
	}
	if w.Type == "error" {
		return nil, c.classify(ctx, failure{body: body, inline: true})
	}
	return w.response()
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

// send encodes req, posts it through the SDK and returns the raw response
// of a 2xx answer, or the classified error of anything else.
func (c *Client) send(ctx context.Context, req llm.Request, stream bool) (*http.Response, error) {
	w, err := c.request(req, stream)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(w)
	if err != nil {
		return nil, &llm.Error{Kind: llm.KindBadRequest, Message: "encoding the request: " + err.Error()}
	}
	if c.keys != nil {
		return keyring.Send(c.keys, func(key string) (*http.Response, error) {
			return c.post(ctx, body, option.WithAPIKey(key))
		})
	}
	return c.post(ctx, body)
}

// post sends the encoded request body (with opts, e.g. the key to use).
func (c *Client) post(ctx context.Context, body []byte, opts ...option.RequestOption) (*http.Response, error) {
	var res *http.Response
	_, err := c.svc.New(ctx, sdk.MessageNewParams{}, append(opts,
		option.WithRequestBody("application/json", body),
		option.WithResponseBodyInto(&res),
		option.WithMiddleware(c.capErrorBody))...)
	if res != nil && res.StatusCode >= 400 {
		b := llmhttp.ReadErrorBody(res, c.maxBytes)
		return nil, c.classify(ctx, failure{status: res.StatusCode, header: res.Header, body: b})
	}
	var apiErr *sdk.Error
	if errors.As(err, &apiErr) && apiErr.Response != nil {
		// The SDK read the error answer itself.
		return nil, c.classify(ctx, failure{status: apiErr.StatusCode, header: apiErr.Response.Header, body: []byte(apiErr.RawJSON())})
	}
	if err != nil {
		if res != nil && res.Body != nil {
			res.Body.Close()
		}
		return nil, c.classify(ctx, failure{err: err})
	}
	if res == nil || res.Body == nil {
		return nil, c.classify(ctx, failure{err: errors.New("anthropic: no response")})
	}
	return res, nil
}

// capErrorBody cuts the body of an error answer at the cap before the SDK
// reads it.
func (c *Client) capErrorBody(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := next(req)
	return llmhttp.CapErrorBody(res, err, c.maxBytes)
}

// readBody reads a whole reply body up to the cap.
func (c *Client) readBody(r io.Reader) ([]byte, error) {
	return llmhttp.ReadBody(r, c.maxBytes, ErrResponseTooLarge)
}

// scrub replaces every credential in s by REDACTED.
func (c *Client) scrub(s string) string { return llmhttp.Scrub(s, c.secrets) }

// trimJSON returns raw with surrounding space removed, or "{}" when it is
// empty or null.
func trimJSON(raw json.RawMessage) json.RawMessage {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return json.RawMessage("{}")
	}
	return t
}
