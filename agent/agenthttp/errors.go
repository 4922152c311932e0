package agenthttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/trigger"
)

// Error is an error with the HTTP status and code it is answered with. The
// handler answers every failure with one, as {"error": {"code", "message"}};
// a Config.Tenant function may return one to choose its answer (403
// forbidden, say) instead of 401.
type Error struct {
	Status  int    // the HTTP status
	Code    string // a stable, machine-readable code: "not_found", "stale"
	Message string // for a developer; never holds a secret or another tenant's data
}

func (e *Error) Error() string {
	return fmt.Sprintf("agenthttp: %d %s: %s", e.Status, e.Code, e.Message)
}

// The codes of the errors the handler answers with (Error.Code).
const (
	CodeUnauthenticated      = "unauthenticated"        // 401: no tenant
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a POST or DELETE not declared application/json
	CodeBodyTooLarge         = "body_too_large"         // 413: past Config.MaxBodyBytes
	CodeInvalidJSON          = "invalid_json"           // 400: a body that is not the JSON expected
	CodeInvalidRequest       = "invalid_request"        // 400: a field or an ID that is not valid
	CodeNotFound             = "not_found"              // 404: no such route, or nothing of that ID for the tenant
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeNotConfigured        = "not_configured"         // 404: /tasks without Config.Tasks
	CodeStale                = "stale"                  // 409: the approval changed since it was shown (its fingerprint)
	CodeConflict             = "conflict"               // 409: the resource's state does not allow it now
	CodeNotRunning           = "not_running"            // 409: cancel or pause with no run going
	CodeExpired              = "expired"                // 410: the approval expired; nothing ran
	CodeNotAllowed           = "not_allowed"            // 422: an edit of a request that allows none
	CodeQueueFull            = "queue_full"             // 429: the conversation's inject queue is full
	CodeCancelled            = "cancelled"              // the run or the request was cancelled
	CodeRefused              = "refused"                // the run was refused (spend limits)
	CodeInternal             = "internal"               // 500: logged, not shown
)

// errorRule maps a sentinel onto the answer it gets.
type errorRule struct {
	err    error
	status int
	code   string
	fixed  string // when set, the message (the error's text may hold what lies below: an address, a user name)
}

// errorRules is the one table from valet's sentinels to HTTP answers,
// first match wins.
var errorRules = []errorRule{
	{approval.ErrStale, http.StatusConflict, CodeStale, ""},
	{approval.ErrNotFound, http.StatusNotFound, CodeNotFound, ""},
	{pool.ErrNotFound, http.StatusNotFound, CodeNotFound, ""},
	{trigger.ErrNotFound, http.StatusNotFound, CodeNotFound, ""},
	{approval.ErrExpired, http.StatusGone, CodeExpired, ""},
	{approval.ErrInvalidDecision, http.StatusBadRequest, CodeInvalidRequest, ""},
	{approval.ErrNotAllowed, http.StatusUnprocessableEntity, CodeNotAllowed, ""},
	{agent.ErrPaused, http.StatusConflict, CodeConflict, ""},
	{agent.ErrStaleAgent, http.StatusConflict, CodeConflict, ""},
	{agent.ErrNotRunning, http.StatusConflict, CodeNotRunning, ""},
	{agent.ErrQueueFull, http.StatusTooManyRequests, CodeQueueFull, ""},
	{agent.ErrInvalidID, http.StatusBadRequest, CodeInvalidRequest, ""},
	{agent.ErrEmptyMessage, http.StatusBadRequest, CodeInvalidRequest, ""},
	{agent.ErrInvalidBudget, http.StatusBadRequest, CodeInvalidRequest, ""},
	{agent.ErrUnknownModel, http.StatusBadRequest, CodeInvalidRequest, ""},
	{agent.ErrSpendRefused, http.StatusTooManyRequests, CodeRefused, ""},
	{trigger.ErrInvalid, http.StatusBadRequest, CodeInvalidRequest, ""},
	{trigger.ErrConflict, http.StatusConflict, CodeConflict, ""},
	{agent.ErrCancelled, http.StatusConflict, CodeCancelled, "the run was cancelled"},
	{context.Canceled, 499, CodeCancelled, "the request was cancelled"},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, CodeCancelled, "a deadline passed before the request completed"},
}

// errorFor returns the answer to err: a rule's status and code, with the
// rule's fixed message or else the error's text (secret-looking spans
// masked), or a 500 whose message says nothing (the caller logs err).
// Cancellations and deadlines get a fixed message: what they wrap is often
// a dependency's failure (a database address, a user name).
func errorFor(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	for _, r := range errorRules {
		if errors.Is(err, r.err) {
			msg := r.fixed
			if msg == "" {
				msg = agent.RedactText(err.Error())
			}
			return &Error{Status: r.status, Code: r.code, Message: msg}
		}
	}
	return &Error{Status: http.StatusInternalServerError, Code: CodeInternal, Message: "internal error"}
}

// errorBody is the uniform shape of an error answer.
type errorBody struct {
	Error *Error `json:"error"`
}

// MarshalJSON writes the error as {"code", "message"}.
func (e *Error) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}{e.Code, e.Message})
}

// fail answers err, logging the cause of a 500.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := errorFor(err)
	if e.Status >= http.StatusInternalServerError {
		h.cfg.Logger.ErrorContext(r.Context(), "agenthttp: request failed", "method", r.Method, "path", r.URL.Path, "err", agent.RedactText(err.Error()))
	}
	writeJSON(w, e.Status, errorBody{e})
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone; nothing to do then
}

// isJSON reports whether the request declares a JSON body.
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// decode reads the request's JSON body into v: at most MaxBodyBytes
// (413 past it), one JSON value with no unknown field (400 naming the
// problem). An empty body is allowed when optional, leaving v as it is.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return tooLarge(h.cfg.MaxBodyBytes)
	}
	body := http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(h.cfg.MaxBodyBytes)
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "reading the body: " + err.Error()}
	}
	if len(data) == 0 {
		if optional {
			return nil
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "the body is empty; a JSON object is expected"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: describeJSONError(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: "the body holds more than one JSON value"}
	}
	if err := checkKeys(data, reflect.TypeOf(v)); err != nil {
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidJSON, Message: err.Error()}
	}
	return nil
}

func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge, Message: fmt.Sprintf("the body is larger than %d bytes", limit)}
}

// describeJSONError names what is wrong with a body, where.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syn.Offset, syn)
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("field %q: %s is not a valid %s", typ.Field, typ.Value, typ.Type)
		}
		return fmt.Sprintf("%s is not a valid %s", typ.Value, typ.Type)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: the body ends in the middle of a value"
	}
	return "malformed JSON: " + err.Error() // json: unknown field "x", and the like
}
