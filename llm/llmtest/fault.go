package llmtest

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault is one injected misbehaviour of a [Server]; see [Server.Inject].
//
// A Fault with a Status answers with that HTTP status and an OpenAI error
// body instead of calling the model. A Fault without a Status serves the
// request normally after its Latency, unless Drop cuts the connection.
type Fault struct {
	// Status is the HTTP status to answer with, e.g. 429, 500, 503, 400.
	// Zero means "serve the request normally" (after Latency, subject to Drop).
	Status int

	// Message, Type, Param and Code fill the error body
	// {"error":{"message","type","param","code"}}. Empty fields take
	// OpenAI's values for Status (e.g. 429 → type "requests", code
	// "rate_limit_exceeded"); an empty Param or Code is sent as null unless
	// the status has a default.
	Message, Type, Param, Code string

	// RetryAfter, when positive, sets the retry-after header (whole seconds,
	// rounded up) and retry-after-ms (milliseconds, rounded up), as OpenAI
	// does on 429s.
	RetryAfter time.Duration

	// Latency is waited before answering. The wait ends early when the
	// client goes away or the server is closed; the connection is then cut.
	Latency time.Duration

	// Drop cuts the connection instead of finishing the answer. The model is
	// called first (so a [Script] spends a reply on the dropped request). A
	// streaming answer sends its headers and DropAfter chunks, then the
	// connection closes without "data: [DONE]" (and without the final empty
	// chunk of the chunked encoding, so clients see an unexpected EOF). A
	// non-streaming answer closes the connection before any response byte.
	// Drop takes precedence over Status.
	Drop bool

	// Body, when set with a Status, is sent as the whole body of the error
	// answer instead of the provider's JSON error, with Content-Type
	// text/html when it starts with "<" (a proxy's or load balancer's error
	// page) and text/plain otherwise. Default: the provider's JSON error.
	Body string

	// DropAfter is the number of data events a dropped stream sends before
	// the cut. A value at least the length of the stream sends all chunks and
	// omits only "data: [DONE]".
	DropAfter int
}

// RateLimited returns a 429 rate_limit_exceeded fault with the given
// Retry-After (none when retryAfter is 0).
func RateLimited(retryAfter time.Duration) Fault {
	return Fault{Status: http.StatusTooManyRequests, RetryAfter: retryAfter}
}

// Unavailable returns a server-error fault with status (500, 502, 503, …);
// a status outside 500–599 becomes 503.
func Unavailable(status int) Fault {
	if status < 500 || status > 599 {
		status = http.StatusServiceUnavailable
	}
	return Fault{Status: status}
}

// ContextOverflow returns the 400 context_length_exceeded fault, worded like
// OpenAI's.
func ContextOverflow() Fault {
	return Fault{
		Status:  http.StatusBadRequest,
		Code:    "context_length_exceeded",
		Param:   "messages",
		Message: "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
	}
}

// Slow returns a fault that waits d and then serves the request normally.
func Slow(d time.Duration) Fault { return Fault{Latency: d} }

// DropStream returns a fault that cuts a streamed answer after afterChunks
// data events, without "data: [DONE]" (and a non-streamed answer before any
// byte).
func DropStream(afterChunks int) Fault { return Fault{Drop: true, DropAfter: afterChunks} }

// apiError is an OpenAI error response: status, headers and body.
type apiError struct {
	Status                     int
	Message, Type, Param, Code string
	RetryAfter                 time.Duration
}

// errorDefaults returns OpenAI's message, type and code for status.
func errorDefaults(status int) (message, typ, code string) {
	switch status {
	case http.StatusBadRequest:
		return "Invalid request.", "invalid_request_error", ""
	case http.StatusUnauthorized:
		return "Incorrect API key provided: sk-llmt****test. You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		return "You are not allowed to sample from this model.", "invalid_request_error", "permission_denied"
	case http.StatusNotFound:
		return "The model does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "Request timed out.", "server_error", "timeout"
	case http.StatusTooManyRequests:
		return "Rate limit reached for llmtest in organization org-llmtest on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s. Visit https://platform.openai.com/account/rate-limits to learn more.", "requests", "rate_limit_exceeded"
	case http.StatusInternalServerError:
		return "The server had an error processing your request. Sorry about that! You can retry your request, or contact us through our help center at help.openai.com if you keep seeing this error.", "server_error", ""
	case http.StatusBadGateway:
		return "Bad gateway.", "server_error", ""
	case http.StatusServiceUnavailable:
		return "That model is currently overloaded with other requests. You can retry your request, or contact us through our help center at help.openai.com if the error persists.", "server_error", ""
	}
	typ = "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	text := http.StatusText(status)
	if text == "" {
		text = "HTTP " + strconv.Itoa(status)
	}
	return text + ".", typ, ""
}

// apiError turns the fault into the error response it describes.
func (f Fault) apiError() apiError {
	msg, typ, code := errorDefaults(f.Status)
	e := apiError{Status: f.Status, Message: f.Message, Type: f.Type, Param: f.Param, Code: f.Code, RetryAfter: f.RetryAfter}
	if e.Message == "" {
		e.Message = msg
	}
	if e.Type == "" {
		e.Type = typ
	}
	if e.Code == "" {
		e.Code = code
	}
	return e
}

// invalid returns a 400 invalid_request_error.
func invalid(param, code, message string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: param, Code: code, Message: message}
}

// Overloaded returns Anthropic's 529 overloaded_error fault (a 529 server
// error on the OpenAI-compatible Server).
func Overloaded() Fault { return Fault{Status: 529} }

// HTMLError returns a fault that answers status with an HTML page, as a
// proxy or load balancer in front of an API does.
func HTMLError(status int) Fault {
	return Fault{Status: status, Body: "<html>\r\n<head><title>" + strconv.Itoa(status) + " " + http.StatusText(status) +
		"</title></head>\r\n<body>\r\n<center><h1>" + strconv.Itoa(status) + " " + http.StatusText(status) +
		"</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"}
}

// writeRawBody answers with f.Body as it is.
func writeRawBody(w http.ResponseWriter, f Fault) {
	ct := "text/plain; charset=utf-8"
	if strings.HasPrefix(strings.TrimSpace(f.Body), "<") {
		ct = "text/html; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(f.Status)
	_, _ = io.WriteString(w, f.Body)
}
