package llm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// ErrorKind classifies a model failure by what the caller should do about it.
type ErrorKind int

// The kinds of model failure. The zero value is KindUnknown.
const (
	KindUnknown         ErrorKind = iota // anything else; not retried
	KindRateLimited                      // 429: wait (see RetryAfter) and retry
	KindContextOverflow                  // the request is longer than the model's window: shorten it
	KindAuth                             // 401/403: bad or missing credentials; retrying will not help
	KindTimeout                          // the call took too long; one retry may help
	KindUnavailable                      // 5xx or a broken connection: retry with backoff
	KindBadRequest                       // 4xx other than the above: the request itself is wrong
)

var kindNames = [...]string{"unknown", "rate_limited", "context_overflow", "auth", "timeout", "unavailable", "bad_request"}

// String returns a short snake_case name, e.g. "rate_limited".
func (k ErrorKind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "ErrorKind(" + strconv.Itoa(int(k)) + ")"
}

// Error is a classified model failure. Backends return it (possibly wrapped);
// inspect it with [KindOf], [RetryAfter] and [IsRetryable] or errors.As.
type Error struct {
	Kind       ErrorKind
	StatusCode int           // HTTP status, 0 when there was none
	Code       string        // provider error code, e.g. "context_length_exceeded"
	Message    string        // provider message (never contains credentials)
	RetryAfter time.Duration // server-suggested wait, 0 when not given
	// ContextLimit and ContextUsed are, for KindContextOverflow, the model's
	// window and the size of the rejected request in tokens, when the server
	// stated them ("maximum context length is N tokens ... resulted in M
	// tokens"); 0 when it did not. Backends parse them so callers never
	// parse error text.
	ContextLimit int
	ContextUsed  int
	Err          error // underlying cause, if any
}

func (e *Error) Error() string {
	s := "llm: " + e.Kind.String()
	if e.StatusCode != 0 {
		s += " (" + strconv.Itoa(e.StatusCode) + ")"
	}
	if e.Code != "" {
		s += " [" + e.Code + "]"
	}
	if e.Message != "" {
		s += ": " + e.Message
	} else if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of err: the Kind of an [*Error] in its chain,
// KindTimeout for context.DeadlineExceeded, KindUnknown otherwise (including
// nil and context.Canceled).
func KindOf(err error) ErrorKind {
	if err == nil {
		return KindUnknown
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return KindTimeout
	}
	return KindUnknown
}

// RetryAfter returns the wait the server asked for, or 0.
func RetryAfter(err error) time.Duration {
	var e *Error
	if errors.As(err, &e) {
		return e.RetryAfter
	}
	return 0
}

// IsRetryable reports whether the same request may succeed if sent again:
// rate limits, timeouts and unavailability. A cancelled context never is.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	switch KindOf(err) {
	case KindRateLimited, KindTimeout, KindUnavailable:
		return true
	}
	return false
}

// ErrPairing is returned by [CheckPairing] (wrapped with details) when tool
// calls and tool results do not match one for one.
var ErrPairing = errors.New("llm: tool calls and tool results do not pair")

// CheckPairing verifies the tool-call pairing invariant of a conversation:
// the tool messages that follow an assistant message with tool calls answer
// exactly those calls, each once, and no tool message appears anywhere else.
func CheckPairing(msgs []Message) error {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch {
		case m.Role == RoleTool:
			return fmt.Errorf("%w: message %d answers tool call %q that no preceding assistant message made", ErrPairing, i, m.ToolCallID)
		case m.Role == RoleAssistant && len(m.ToolCalls) > 0:
			open := make(map[string]bool, len(m.ToolCalls))
			for _, c := range m.ToolCalls {
				if open[c.ID] {
					return fmt.Errorf("%w: message %d repeats tool call id %q", ErrPairing, i, c.ID)
				}
				open[c.ID] = true
			}
			j := i + 1
			for ; j < len(msgs) && msgs[j].Role == RoleTool; j++ {
				id := msgs[j].ToolCallID
				if !open[id] {
					return fmt.Errorf("%w: message %d answers tool call %q that message %d did not make or that was already answered", ErrPairing, j, id, i)
				}
				delete(open, id)
			}
			for _, c := range m.ToolCalls {
				if open[c.ID] {
					return fmt.Errorf("%w: tool call %q (%s) of message %d has no result", ErrPairing, c.ID, c.Name, i)
				}
			}
			i = j - 1
		}
	}
	return nil
}
