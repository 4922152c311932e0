package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/valetkit/valet/llm"
)

// Tool is something the model can call. Implementations must be safe for
// concurrent use: the orchestrator runs the calls of one turn concurrently.
type Tool interface {
	// Spec describes the tool to the model.
	Spec() llm.ToolSpec
	// Call runs the tool with the model's arguments (a JSON object) and
	// returns the text the model reads.
	Call(ctx context.Context, args json.RawMessage) (string, error)
}

// Risk is how much harm a tool call can do. The orchestrator classifies
// every call before it runs, from the tool's declared risk (WithRisk,
// Settings.Risk) refined by its risk policy (agent.LoopConfig.RiskPolicy):
// a low call runs, a medium one runs and is logged, a high one waits for
// the user's approval and a critical one is denied.
type Risk int

// Risk levels, in increasing order of harm.
const (
	RiskLow Risk = iota
	RiskMedium
	RiskHigh
	// RiskCritical is never run: the call is denied with an error result
	// the model reads.
	RiskCritical
)

// String returns "low", "medium", "high" or "critical".
func (r Risk) String() string {
	switch r {
	case RiskLow:
		return "low"
	case RiskMedium:
		return "medium"
	case RiskHigh:
		return "high"
	case RiskCritical:
		return "critical"
	}
	return "Risk(" + strconv.Itoa(int(r)) + ")"
}

// DefaultRetryDelay is the base delay between retries when WithRetries is
// given no delay.
const DefaultRetryDelay = 200 * time.Millisecond

// Settings are a tool's overrides of the caller's defaults; a zero field
// means "use the caller's default".
type Settings struct {
	// Timeout bounds one Registry.Execute of the tool, retries included.
	Timeout time.Duration
	// Risk is the tool's risk level.
	Risk Risk
	// Retries is the number of extra attempts after a transient error (see
	// Transient); other errors are never retried.
	Retries int
	// RetryDelay is the delay before the first retry, doubled before each
	// further one. Zero means DefaultRetryDelay.
	RetryDelay time.Duration
}

// SettingsOf returns t's Settings when t has a Settings() Settings method
// (tools made by New do), else the zero value.
func SettingsOf(t Tool) Settings {
	if s, ok := t.(interface{ Settings() Settings }); ok {
		return s.Settings()
	}
	return Settings{}
}

// Option configures a tool made by New.
type Option func(*Settings)

// WithTimeout overrides the caller's timeout for this tool.
func WithTimeout(d time.Duration) Option { return func(s *Settings) { s.Timeout = d } }

// WithRisk sets the tool's risk level.
func WithRisk(r Risk) Option { return func(s *Settings) { s.Risk = r } }

// WithRetries retries the tool up to n more times after a transient error,
// waiting baseDelay (DefaultRetryDelay when zero), then twice that, and so
// on. The waits end early when ctx is done.
func WithRetries(n int, baseDelay time.Duration) Option {
	return func(s *Settings) {
		s.Retries = max(n, 0)
		s.RetryDelay = baseDelay
	}
}

// New builds a Tool from a typed function.
//
// In must be a struct or a pointer to a struct; its JSON schema is generated
// once, here, from its json and jsonschema tags and compiled once. Each Call
// validates the arguments against it, then unmarshals them into an In and
// calls fn. A string Out is returned as is; any other Out is JSON-encoded
// without HTML escaping, a nil slice as [] and a nil map as {} (other nil
// values as null).
//
// New never panics. A definition error — a name not matching
// ^[a-zA-Z0-9_-]{1,64}$, an In that is not a struct, a schema that cannot be
// generated, a nil fn — is kept: Err returns it, NewRegistry and
// Registry.Add reject the tool with it, and every Call returns it.
func New[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...Option) Tool {
	t := &funcTool[In, Out]{fn: fn}
	t.spec.Name = name
	t.spec.Description = description
	for _, o := range opts {
		if o != nil {
			o(&t.settings)
		}
	}
	if t.settings.Retries > 0 && t.settings.RetryDelay <= 0 {
		t.settings.RetryDelay = DefaultRetryDelay
	}
	rt := reflect.TypeFor[Out]()
	t.outIsString = rt.Kind() == reflect.String && rt == reflect.TypeFor[string]()
	switch {
	case !validName(name):
		t.err = fmt.Errorf("%w: name %q must match ^[a-zA-Z0-9_-]{1,64}$", ErrInvalidTool, name)
	case fn == nil:
		t.err = fmt.Errorf("%w: tool %q has a nil function", ErrInvalidTool, name)
	default:
		s, err := SchemaFor[In]()
		if err != nil {
			t.err = fmt.Errorf("tool %q: %w", name, err)
		} else {
			t.schema = s
			t.spec.Parameters = s.JSON()
		}
	}
	return t
}

// Err returns the definition error of a tool made by New, or nil.
func Err(t Tool) error {
	if d, ok := t.(interface{ definitionError() error }); ok {
		return d.definitionError()
	}
	return nil
}

// SchemaOf returns the argument schema of a tool made by New, or nil.
func SchemaOf(t Tool) *Schema {
	if s, ok := t.(interface{ argumentSchema() *Schema }); ok {
		return s.argumentSchema()
	}
	return nil
}

func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

type funcTool[In, Out any] struct {
	spec        llm.ToolSpec
	schema      *Schema
	fn          func(context.Context, In) (Out, error)
	settings    Settings
	err         error
	outIsString bool
}

func (t *funcTool[In, Out]) Spec() llm.ToolSpec      { return t.spec }
func (t *funcTool[In, Out]) Settings() Settings      { return t.settings }
func (t *funcTool[In, Out]) definitionError() error  { return t.err }
func (t *funcTool[In, Out]) argumentSchema() *Schema { return t.schema }

// Call validates args, decodes them and runs the function, retrying
// transient errors as configured. A panic in the function is recovered and
// returned as a *PanicError.
func (t *funcTool[In, Out]) Call(ctx context.Context, args json.RawMessage) (string, error) {
	c, err := t.bind(args)
	if err != nil {
		return "", err
	}
	out, _, err := c.call(ctx)
	return out, err
}

func (t *funcTool[In, Out]) invoke(ctx context.Context, in In) (s string, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = "", &PanicError{Tool: t.spec.Name, Value: r, Stack: debug.Stack()}
		}
	}()
	out, err := t.fn(ctx, in)
	if err != nil {
		return "", err
	}
	if t.outIsString {
		return any(out).(string), nil
	}
	return encodeResult(out)
}

// encodeResult JSON-encodes a non-string result without HTML escaping; a
// nil slice becomes [] and a nil map {}.
func encodeResult(out any) (string, error) {
	switch rv := reflect.ValueOf(out); rv.Kind() {
	case reflect.Slice:
		if rv.IsNil() && rv.Type().Elem().Kind() != reflect.Uint8 {
			return "[]", nil
		}
	case reflect.Map:
		if rv.IsNil() {
			return "{}", nil
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return "", fmt.Errorf("tool: encoding the result: %w", err)
	}
	return string(bytes.TrimRight(buf.Bytes(), "\n")), nil
}

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
