package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/valetkit/valet/internal/llmhttp"
	"github.com/valetkit/valet/llm"
)

// failure is everything known about one failed call.
type failure struct {
	status    int         // HTTP status of an error answer, 0 otherwise
	header    http.Header // its headers
	body      []byte      // the error body, an SSE data payload, or a body that did not decode
	err       error       // transport, read or decode error
	inline    bool        // body is an error sent inside a 200 answer (a chunk, an "event: error")
	malformed bool        // body was expected to be a completion but did not decode
	truncated bool        // the stream ended before the reply was complete
}

// Error codes of a 429 that waiting will not fix: the account is out of
// credit or has no billing. They are classified llm.KindAuth, like a 402
// Payment Required (see doc.go).
var quotaCodes = map[string]bool{
	"insufficient_quota":         true,
	"billing_hard_limit_reached": true,
	"billing_not_active":         true,
	"access_terminated":          true,
}

// Messages that compatible servers use for a prompt longer than the model's
// window when they do not send the code "context_length_exceeded" (vLLM,
// DeepSeek, LiteLLM, Ollama, llama.cpp...). Matched in lower case.
var overflowPhrases = []string{
	"context length",
	"context_length",
	"context window",
	"maximum context",
	"too many tokens",
	"too many input tokens",
	"prompt is too long",
	"input is too long",
	"reduce the length of the messages",
	"exceeds the available context",
	"exceed context",
}

// classify turns any failure of a call into an *llm.Error. It is the only
// place where errors are classified.
func (c *Client) classify(ctx context.Context, f failure) error {
	e := &llm.Error{StatusCode: f.status}
	if f.err != nil {
		// A transport or read error: the context first, since cancelling it
		// is what breaks the connection.
		switch {
		case errors.Is(f.err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
			e.Kind, e.Message, e.Err = llm.KindUnknown, "request cancelled", context.Canceled
			if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
				e.Err = errors.Join(context.Canceled, c.scrubErr(cause))
			}
			return e
		case errors.Is(f.err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
			e.Kind, e.Message, e.Err = llm.KindTimeout, "deadline exceeded", context.DeadlineExceeded
			return e
		}
		// No credential may stay in the chain: a *url.Error from net/http
		// holds the request's URL, with BaseURL's query.
		e.Err = c.scrubErr(f.err)
		e.Message = c.scrub(e.Err.Error())
		switch {
		case errors.Is(f.err, ErrTooManyToolCalls):
			// Like ErrResponseTooLarge, which it wraps.
			e.Kind = llm.KindUnknown
			e.Message = fmt.Sprintf("the reply has more than %d tool calls (MaxToolCallsPerReply)", MaxToolCallsPerReply)
		case errors.Is(f.err, ErrResponseTooLarge):
			// KindUnknown: the request was accepted and answered, so it is
			// not a bad request; and no retryable kind, since sending it
			// again would bring the same oversized reply. The caller
			// decides (raise the cap, ask for less).
			e.Kind = llm.KindUnknown
			e.Message = fmt.Sprintf("the reply exceeded %d bytes (Config.MaxResponseBytes)", c.maxBytes)
		case f.truncated:
			e.Kind, e.Message = llm.KindUnavailable, "stream ended before the reply was complete"
		case f.malformed:
			e.Kind = llm.KindUnavailable
			if len(f.body) > 0 {
				e.Message = "undecodable reply: " + snippet(c.scrub(string(f.body)))
			}
		default:
			e.Kind = transportKind(f.err)
		}
		if f.status < 400 {
			return e
		}
	}

	p := parseErrorBody(f.body)
	e.Code = c.scrub(p.code)
	if p.message != "" {
		e.Message = c.scrub(p.message)
	} else if e.Message == "" && len(f.body) > 0 {
		e.Message = snippet(c.scrub(string(f.body)))
	}
	if e.Message == "" && f.status != 0 {
		e.Message = http.StatusText(f.status)
	}
	status := f.status
	if status < 400 { // an error inside a 200 answer: use the status it names
		status = p.status
		e.StatusCode = status
	}
	e.RetryAfter = retryAfter(f.header, time.Now())
	lower := strings.ToLower(p.message + " " + p.raw)
	switch {
	case status == 429 && quotaCodes[strings.ToLower(p.code)]:
		e.Kind = llm.KindAuth
	case status == 429:
		e.Kind = llm.KindRateLimited
	case status == 401 || status == 402 || status == 403:
		e.Kind = llm.KindAuth
	case p.code == "context_length_exceeded" || status == 413:
		e.Kind = llm.KindContextOverflow
	case (status == 400 || status == 422 || status == 0) && containsAny(lower, overflowPhrases):
		e.Kind = llm.KindContextOverflow
	case status == 408 || status == 504:
		e.Kind = llm.KindTimeout
	case status >= 500:
		e.Kind = llm.KindUnavailable
	case status >= 400:
		e.Kind = llm.KindBadRequest
	default:
		e.Kind = typeKind(p.typ)
	}
	if e.Kind == llm.KindContextOverflow {
		e.ContextLimit, e.ContextUsed = overflowFigures(p)
	}
	return e
}

// The wordings that state a context window and a request size, matched in
// any case; a number may have thousands separators ("128,000"):
//
//	OpenAI, DeepSeek, vLLM: "maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens"
//	                        "maximum context length is 8192 tokens, however you requested 9000 tokens (8000 in your prompt; ...)"
//	vLLM (newer):           "maximum context length of 131072 tokens. You requested a total of 140000 tokens: ..."
//	llama.cpp:              "request (13392 tokens) exceeds the available context size (8192 tokens)"
//	Anthropic via proxies:  "prompt is too long: 210000 tokens > 200000 maximum"
//
// The request size is the total the server counted (prompt and completion
// when it names both), as it states it.
var (
	tokensNum       = `(\d{1,3}(?:,\d{3})+|\d+)`
	contextLimitRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)maximum context length (?:is|of) ` + tokensNum + ` tokens`),
		regexp.MustCompile(`(?i)available context size \(` + tokensNum + ` tokens\)`),
		regexp.MustCompile(`(?i)tokens > ` + tokensNum + ` maximum`),
	}
	contextUsedRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)resulted in ` + tokensNum + ` tokens`),
		regexp.MustCompile(`(?i)you requested (?:a total of )?` + tokensNum + ` tokens`),
		regexp.MustCompile(`(?i)request \(` + tokensNum + ` tokens\) exceeds`),
		regexp.MustCompile(`(?i)prompt is too long: ` + tokensNum + ` tokens >`),
	}
)

// overflowFigures returns the context window and the request size an
// overflow error states, each 0 when it does not state it: llama.cpp's
// n_ctx and n_prompt_tokens fields, else the message's wording. Nothing is
// guessed: a number is taken only from a wording that names it.
func overflowFigures(p parsedError) (limit, used int) {
	limit, used = p.nCtx, p.nPrompt
	if limit == 0 {
		limit = firstNumber(contextLimitRes, p.message)
	}
	if used == 0 {
		used = firstNumber(contextUsedRes, p.message)
	}
	return limit, used
}

// firstNumber returns the number captured by the first of res that matches
// s, or 0.
func firstNumber(res []*regexp.Regexp, s string) int {
	for _, re := range res {
		if m := re.FindStringSubmatch(s); m != nil {
			if n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", "")); err == nil && n > 0 {
				return n
			}
		}
	}
	return 0
}

// transportKind classifies an error of the HTTP exchange itself.
func transportKind(err error) llm.ErrorKind {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return llm.KindTimeout
	}
	var op *net.OpError
	var dns *net.DNSError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, net.ErrClosed), errors.As(err, &op), errors.As(err, &dns),
		strings.Contains(err.Error(), "http2:"):
		return llm.KindUnavailable
	}
	return llm.KindUnknown
}

// typeKind classifies an error that names no status by its "type".
func typeKind(typ string) llm.ErrorKind {
	switch strings.ToLower(typ) {
	case "server_error", "api_error", "overloaded_error", "service_unavailable":
		return llm.KindUnavailable
	case "rate_limit_error", "rate_limit_exceeded", "requests", "tokens":
		return llm.KindRateLimited
	case "invalid_request_error", "bad_request_error":
		return llm.KindBadRequest
	case "authentication_error", "permission_error":
		return llm.KindAuth
	}
	return llm.KindUnknown
}

// parsedError is what could be read from an error body.
type parsedError struct {
	message, code, typ, raw string
	status                  int // a status the body names: "status_code", or a numeric code 400-599
	nCtx, nPrompt           int // llama.cpp's n_ctx and n_prompt_tokens of an overflow
}

// parseErrorBody reads the error shapes servers send: {"error": {...}}
// (OpenAI, Groq, OpenRouter, Z.ai), {"error": "text"} (Ollama),
// {"object": "error", "message", "code"} (vLLM), {"detail": ...} (FastAPI).
// Codes may be strings or numbers.
func parseErrorBody(body []byte) parsedError {
	var p parsedError
	var top struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
		errorObject
	}
	if json.Unmarshal(body, &top) != nil {
		return p
	}
	obj := top.errorObject
	if e := bytes.TrimSpace(top.Error); len(e) > 0 && e[0] == '{' {
		obj = errorObject{}
		_ = json.Unmarshal(e, &obj)
	} else if len(e) > 0 && e[0] == '"' {
		p.message = jsonText(e)
	}
	if p.message == "" {
		p.message = jsonText(obj.Message)
	}
	if p.message == "" {
		p.message = jsonText(top.Detail)
	}
	p.code = jsonText(obj.Code)
	p.typ = obj.Type
	p.nCtx, p.nPrompt = max(int(obj.NCtx), 0), max(int(obj.NPromptTokens), 0)
	p.raw = jsonText(obj.Metadata.Raw)
	if p.raw != "" && !strings.Contains(p.message, p.raw) {
		if p.message != "" {
			p.message += ": "
		}
		p.message += p.raw
	}
	if obj.StatusCode >= 400 && obj.StatusCode < 600 {
		p.status = int(obj.StatusCode)
	} else if n, err := strconv.Atoi(p.code); err == nil && n >= 400 && n < 600 && isNumber(obj.Code) {
		p.status = n
	}
	return p
}

type errorObject struct {
	Message    json.RawMessage `json:"message"`
	Code       json.RawMessage `json:"code"`
	Type       string          `json:"type"`
	StatusCode flexInt         `json:"status_code"`
	// llama.cpp states an overflow's figures as fields too.
	NCtx          flexInt `json:"n_ctx"`
	NPromptTokens flexInt `json:"n_prompt_tokens"`
	Metadata      struct {
		Raw json.RawMessage `json:"raw"`
	} `json:"metadata"`
}

// jsonText renders a JSON string as its content, a number as its literal,
// null as "", and anything else as compact JSON.
func jsonText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) == nil {
		return b.String()
	}
	return string(raw)
}

func isNumber(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

// retryAfter reads retry-after-ms (OpenAI, milliseconds) or Retry-After
// (seconds or an HTTP date). Waits too long for a time.Duration (or
// infinite) are capped at the longest one rather than wrapping round to a
// negative value; NaN, negative and unreadable values count as absent.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if d := scaledDuration(v, time.Millisecond); d > 0 {
			return d
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return scaledDuration(v, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// scaledDuration parses v as a number of units, capping it at the longest
// time.Duration; it returns 0 for anything not a positive number.
func scaledDuration(v string, unit time.Duration) time.Duration {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && !(errors.Is(err, strconv.ErrRange) && f > 0) {
		return 0
	}
	if math.IsNaN(f) || f <= 0 {
		return 0
	}
	if x := f * float64(unit); x < float64(math.MaxInt64) { // float64(MaxInt64) is 2^63
		return time.Duration(x)
	}
	return time.Duration(math.MaxInt64)
}

// scrub removes the credentials (the API key, credential headers and
// query parameters, a password in BaseURL) from text that goes into an
// error.
func (c *Client) scrub(s string) string { return llmhttp.Scrub(s, c.secrets) }

// snippet returns s trimmed and cut to about 300 bytes, on a character
// boundary. Scrub s before: a cut could leave part of a secret.
func snippet(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		n := 300
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// minSecretLen is the length below which a configured value is not treated
// as a secret to scrub: replacing every "x" of a message because a local
// server was given the key "x" would only garble it.
const minSecretLen = 4

// credentialName reports whether a header or query parameter name is one
// whose value is a credential. The name is split into words at every
// character that is not an ASCII letter or digit (-, _, ., space...),
// between letters and digits, and at camelCase boundaries, acronyms
// included ("XAPIKey" is X, API, Key; "sessionId" is session, Id), like
// package agent splits the keys it masks in summaries. Words compare
// case-insensitively. The name is a credential when a word:
//   - is one of credentialWords;
//   - ends with key, token, secret or pwd (apikey, accesstoken,
//     clientsecret, subscriptionkey);
//   - contains password, passwd, passphrase, credential or signature
//     (userpassword);
//   - is one of the above plus "s" (keys, accesstokens).
//
// Whole words only otherwise: api-version, author, passage, bypass, signal,
// codec, keyword and tokenizer are not credentials.
func credentialName(name string) bool {
	for _, w := range nameWords(name) {
		if credentialWord(w) {
			return true
		}
	}
	return false
}

// credentialWords are the words that make a name a credential's (see
// credentialName). "code" is Azure Functions' key parameter (and OAuth's
// authorization code), "sig" Azure's SAS signature, "session" a session id.
var credentialWords = map[string]bool{
	"key": true, "apikey": true, "token": true, "secret": true,
	"password": true, "passwd": true, "pwd": true, "pass": true, "passphrase": true,
	"signature": true, "sig": true, "auth": true, "authorization": true,
	"credential": true, "session": true, "code": true, "cookie": true,
	"jwt": true, "bearer": true,
}

// credentialWord reports whether w, one lower-case word of a name, makes
// it a credential's (see credentialName).
func credentialWord(w string) bool {
	if len(w) > 1 && w[len(w)-1] == 's' && credentialWord(w[:len(w)-1]) { // a plural: keys, accesstokens
		return true
	}
	if credentialWords[w] {
		return true
	}
	for _, suffix := range [...]string{"key", "token", "secret", "pwd"} {
		if len(w) > len(suffix) && strings.HasSuffix(w, suffix) {
			return true
		}
	}
	for _, part := range [...]string{"password", "passwd", "passphrase", "credential", "signature"} {
		if strings.Contains(w, part) {
			return true
		}
	}
	return false
}

// nameWords splits name into lower-case words (see credentialName). Bytes
// of non-ASCII characters count as lower-case letters.
func nameWords(name string) []string {
	const (
		sep = iota
		lower
		upper
		digit
	)
	class := func(c byte) int {
		switch {
		case 'a' <= c && c <= 'z', c >= utf8.RuneSelf:
			return lower
		case 'A' <= c && c <= 'Z':
			return upper
		case '0' <= c && c <= '9':
			return digit
		}
		return sep
	}
	var words []string
	for i := 0; i < len(name); {
		prev := class(name[i])
		if prev == sep {
			i++
			continue
		}
		j := i + 1
		for ; j < len(name); j++ {
			cur := class(name[j])
			if cur == sep || (prev == digit) != (cur == digit) || prev == lower && cur == upper {
				break
			}
			// "APIKey": the upper-case letter before a lower-case one starts a word.
			if prev == upper && cur == upper && j+1 < len(name) && class(name[j+1]) == lower {
				break
			}
			prev = cur
		}
		words = append(words, strings.ToLower(name[i:j]))
		i = j
	}
	return words
}

// secretsOf lists the credentials of cfg, longest first.
func secretsOf(cfg Config) []string {
	var out []string
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) >= minSecretLen {
			out = append(out, v)
			if bearer, ok := strings.CutPrefix(v, "Bearer "); ok && len(bearer) >= minSecretLen {
				out = append(out, bearer)
			}
		}
	}
	add(cfg.APIKey)
	for _, k := range cfg.APIKeys {
		add(k)
	}
	for k, v := range cfg.Headers {
		if credentialName(k) {
			add(v)
		}
	}
	for _, v := range rawURLCredentials(cfg.BaseURL) {
		add(v)
	}
	if u, err := url.Parse(cfg.BaseURL); err == nil {
		// The user name too: a token is often passed as the user
		// (https://TOKEN@host), with no password.
		var user []string
		if u.User != nil {
			user = append(user, u.User.Username())
		}
		if pw, ok := u.User.Password(); ok {
			user = append(user, pw)
		}
		for _, v := range user {
			add(v)
			if esc := url.QueryEscape(v); esc != v {
				add(esc)
			}
		}
		for k, vs := range u.Query() {
			if credentialName(k) {
				for _, v := range vs {
					add(v)
					if esc := url.QueryEscape(v); esc != v {
						add(esc)
					}
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// redactURL returns base with its userinfo (user name and password) and
// the values of credential query parameters (see credentialName) replaced
// by REDACTED, for printing. The query is redacted as written, pair by
// pair, with '&' and ';' both taken as separators: url.Values would drop a
// pair after a ';' (and so print it unredacted) while the request still
// sends it.
func redactURL(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return redactRawURL(base)
	}
	changed := false
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword("REDACTED", "REDACTED")
		} else {
			u.User = url.User("REDACTED")
		}
		changed = true
	}
	if q, ok := redactQuery(u.RawQuery); ok {
		u.RawQuery = q
		changed = true
	}
	if !changed {
		return base
	}
	return u.String()
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
