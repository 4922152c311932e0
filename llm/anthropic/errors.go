package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/valetkit/valet/llm"
)

// failure is what went wrong with one call, for classify.
type failure struct {
	status    int
	header    http.Header
	body      []byte
	err       error
	malformed bool // a 2xx body that is not a reply
	truncated bool // a stream that ended before message_stop
	inline    bool // an error object inside a 2xx answer or an "error" event
}

// wireError is Anthropic's error body:
// {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_..."}.
type wireError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// promptTooLong matches "prompt is too long: 210000 tokens > 200000 maximum".
var promptTooLong = regexp.MustCompile(`(?i)prompt is too long:\s*(\d+)\s*tokens\s*>\s*(\d+)`)

// statusOf maps an error type to the status the API answers it with, for
// errors met inside a stream (which come without a status).
var statusOf = map[string]int{
	"invalid_request_error": 400,
	"authentication_error":  401,
	"billing_error":         402,
	"permission_error":      403,
	"not_found_error":       404,
	"request_too_large":     413,
	"rate_limit_error":      429,
	"api_error":             500,
	"timeout_error":         504,
	"overloaded_error":      529,
}

// classify turns a failure into an *llm.Error.
func (c *Client) classify(ctx context.Context, f failure) error {
	e := &llm.Error{StatusCode: f.status}
	if f.err != nil {
		switch {
		case errors.Is(f.err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
			e.Kind, e.Message, e.Err = llm.KindUnknown, "request cancelled", context.Canceled
			return e
		case errors.Is(f.err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
			e.Kind, e.Message, e.Err = llm.KindTimeout, "deadline exceeded", context.DeadlineExceeded
			return e
		}
		e.Message = c.scrub(f.err.Error())
		e.Err = errors.New(e.Message) // the chain may hold the request URL and headers
		switch {
		case errors.Is(f.err, ErrResponseTooLarge):
			e.Kind, e.Err = llm.KindUnknown, ErrResponseTooLarge
			e.Message = "the reply exceeded Config.MaxResponseBytes"
		case f.truncated:
			e.Kind = llm.KindUnavailable
		case f.malformed:
			e.Kind = llm.KindUnavailable
			e.Message = "undecodable reply: " + snippet(c.scrub(string(f.body)))
		default:
			e.Kind = transportKind(f.err)
		}
		return e
	}

	var w wireError
	isJSON := json.Unmarshal(f.body, &w) == nil && w.Error.Type+w.Error.Message != ""
	if isJSON {
		e.Code = w.Error.Type
		e.Message = c.scrub(w.Error.Message)
	} else {
		e.Message = describeBody(f.status, f.header, c.scrub(string(f.body)))
	}
	status := f.status
	if f.inline || status == 0 {
		status = statusOf[e.Code]
		e.StatusCode = status
	}
	e.RetryAfter = retryAfter(f.header)
	switch {
	case e.Code == "overloaded_error" || status == 529:
		e.Kind = llm.KindUnavailable
	case e.Code == "rate_limit_error" || status == http.StatusTooManyRequests:
		e.Kind = llm.KindRateLimited
	case e.Code == "request_too_large" || status == http.StatusRequestEntityTooLarge:
		e.Kind = llm.KindContextOverflow
	case promptTooLong.MatchString(e.Message) || (status == http.StatusBadRequest && strings.Contains(strings.ToLower(e.Message), "prompt is too long")):
		e.Kind = llm.KindContextOverflow
		if m := promptTooLong.FindStringSubmatch(e.Message); m != nil {
			e.ContextUsed, _ = strconv.Atoi(m[1])
			e.ContextLimit, _ = strconv.Atoi(m[2])
		}
	case e.Code == "authentication_error" || e.Code == "permission_error" || e.Code == "billing_error" ||
		status == http.StatusUnauthorized || status == http.StatusForbidden || status == http.StatusPaymentRequired:
		e.Kind = llm.KindAuth
	case e.Code == "timeout_error" || status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		e.Kind = llm.KindTimeout
	case status >= 500 || e.Code == "api_error":
		e.Kind = llm.KindUnavailable
	case status >= 400:
		e.Kind = llm.KindBadRequest
	default:
		e.Kind = llm.KindUnknown
	}
	return e
}

// describeBody describes an error answer that is not Anthropic's JSON — a
// proxy's or load balancer's HTML page, plain text — by its status, its
// content type and its title or first words.
func describeBody(status int, h http.Header, body string) string {
	ct := ""
	if h != nil {
		ct = h.Get("Content-Type")
	}
	lower := strings.ToLower(body)
	isHTML := strings.Contains(ct, "html") || strings.HasPrefix(strings.TrimSpace(lower), "<")
	text := ""
	if isHTML {
		if i := strings.Index(lower, "<title>"); i >= 0 {
			if j := strings.Index(lower[i:], "</title>"); j > 0 {
				text = strings.TrimSpace(body[i+len("<title>") : i+j])
			}
		}
		if ct == "" {
			ct = "text/html"
		}
	} else {
		text = body
	}
	msg := fmt.Sprintf("HTTP %d", status)
	if status == 0 {
		msg = "error"
	}
	if ct != "" {
		msg += " with a non-JSON body (" + ct + ")"
	}
	if t := snippet(text); t != "" {
		msg += ": " + t
	}
	return msg
}

// snippet returns the start of s on one line.
func snippet(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// retryAfter reads retry-after (seconds or an HTTP date) or retry-after-ms.
func retryAfter(h http.Header) time.Duration {
	if h == nil {
		return 0
	}
	if v := h.Get("retry-after-ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("retry-after")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}

// transportKind classifies an error of the exchange itself.
func transportKind(err error) llm.ErrorKind {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return llm.KindTimeout
	}
	return llm.KindUnavailable
}
