package tool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrInvalidArguments is matched by every *ArgumentError.
	ErrInvalidArguments = errors.New("tool: invalid arguments")
	// ErrUnknownTool is wrapped by the error of a call to a tool that is not
	// registered.
	ErrUnknownTool = errors.New("tool: unknown tool")
	// ErrInvalidTool is wrapped by definition errors: a bad name, an input
	// type that is not a struct, a schema that cannot be generated, a nil
	// function or tool.
	ErrInvalidTool = errors.New("tool: invalid tool definition")
	// ErrDuplicateTool is wrapped when two tools of a Registry share a name.
	ErrDuplicateTool = errors.New("tool: duplicate tool name")
)

// FieldError is one violation of a tool's argument schema.
type FieldError struct {
	// Field is the path of the offending value, JSON-pointer style without
	// the leading slash: "days", "items/0/name". It is "" when the problem
	// concerns the arguments as a whole (malformed JSON, not an object).
	Field string
	// Rule is the schema keyword that failed: "required", "type", "enum",
	// "minimum", "maximum", "format", "additionalProperties", "minLength",
	// "pattern", ... or "json" when the arguments are not valid JSON or do
	// not decode into the input type.
	Rule string
	// Message says what is wrong, in words a model can act on.
	Message string
}

// String renders the problem as "field: message (rule)".
func (f FieldError) String() string {
	var b strings.Builder
	f.write(&b)
	return b.String()
}

func (f FieldError) write(b *strings.Builder) {
	if f.Field != "" {
		b.WriteString(f.Field)
		b.WriteString(": ")
	}
	b.WriteString(f.Message)
	if f.Rule != "" {
		b.WriteString(" (")
		b.WriteString(f.Rule)
		b.WriteString(")")
	}
}

// ArgumentError reports every way the arguments of one call break the tool's
// schema. errors.Is(err, ErrInvalidArguments) is true for it.
type ArgumentError struct {
	Tool     string // the tool's name; "" when returned by Schema.Validate
	Problems []FieldError
}

// Error lists the problems, for example
// `invalid arguments for get_weather: days: must be <= 7, got 10 (maximum); city: missing required field (required)`.
func (e *ArgumentError) Error() string {
	var b strings.Builder
	b.WriteString("invalid arguments")
	if e.Tool != "" {
		b.WriteString(" for ")
		b.WriteString(e.Tool)
	}
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		p.write(&b)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalidArguments) true.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalidArguments }

// PanicError reports that a tool panicked. The panic was recovered; Value is
// the recovered value and Stack the goroutine's stack at that point.
type PanicError struct {
	Tool  string
	Value any
	Stack []byte
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tool %q panicked: %v", e.Tool, e.Value)
}

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Transient marks err as an infrastructure failure (a dropped connection, a
// 503 from an upstream API) that is worth retrying. Tools built with
// WithRetries retry only such errors. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

// IsTransient reports whether err, or an error it wraps, was marked with
// Transient or is a net.Error whose Timeout() is true (a network timeout;
// context.DeadlineExceeded itself is not transient: the caller's deadline
// has passed and retrying cannot help).
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var te *transientError
	if errors.As(err, &te) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() && error(ne) != context.DeadlineExceeded
}
