package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/valetkit/valet/llm"
)

// Bound is one tool call made ready to run: its tool looked up and, for a
// tool made by New, its arguments validated and decoded. Registry.Bind
// makes it and Run runs it, on the same goroutine or another;
// Registry.Execute is the two in one.
//
// Binding apart from running lets a caller validate and decode on a
// goroutine whose stack is already deep (validation and JSON decoding grow
// a new goroutine's stack two or three times) and run the tool on a fresh
// one, whose stack then holds only the tool's own frames and a few of
// Run's while the tool waits.
//
// A Bound is a small value; copy it freely. Running it again runs the tool
// again with the same decoded arguments, as a retry does. Run of the zero
// Bound returns an error Result wrapping ErrUnknownTool.
type Bound struct {
	c    boundCall // nil when binding failed, or for the zero Bound
	fail *Result   // why binding failed: an unknown tool, rejected arguments
}

// boundCall is a bound call of one kind of tool.
type boundCall interface {
	// call runs the tool: its output, how many times it ran, its error.
	call(ctx context.Context) (string, int, error)
	// about is the tool's name and its own timeout (0 when none).
	about() (string, time.Duration)
}

// Bind looks up the tool of call and, for a tool made by New, validates and
// decodes its arguments. It never panics and has no error return: a call
// that cannot run (an unknown tool, invalid arguments, a tool with a
// definition error) binds to the Result Execute would return for it, which
// Run returns without running anything. Decoded reports which happened.
func (r *Registry) Bind(call llm.ToolCall) (b Bound) {
	t, ok := r.Get(call.Name)
	if !ok {
		res := r.unknown(call.Name)
		return Bound{fail: &res}
	}
	d, ok := t.(interface {
		bind(json.RawMessage) (boundCall, error)
	})
	if !ok {
		return Bound{c: &toolCall{t: t, name: call.Name, args: call.Arguments}}
	}
	defer func() {
		// Validation runs on hostile text: a panic in it is a failed
		// call, not a crashed loop.
		if v := recover(); v != nil {
			b = Bound{fail: &Result{
				Content: fmt.Sprintf("tool %q failed: internal error", call.Name), IsError: true,
				Err: &PanicError{Tool: call.Name, Value: v, Stack: debug.Stack()},
			}}
		}
	}()
	c, err := d.bind(call.Arguments)
	if err != nil {
		res := failure(call.Name, err, 0, 0, false)
		return Bound{fail: &res}
	}
	return Bound{c: c}
}

// Decoded reports whether b holds decoded arguments, so that Run calls the
// tool's function without touching JSON: true for a tool made by New whose
// arguments were valid; false for other tools (their Call decodes) and for
// a call that failed to bind (Run does nothing).
func (b Bound) Decoded() bool {
	_, ok := b.c.(decodedCall)
	return ok
}

// decodedCall marks the boundCalls of tools made by New.
type decodedCall interface {
	boundCall
	decoded()
}

// Run runs the bound call and turns every outcome into a Result, as
// Execute does: the timeout is the tool's Settings.Timeout when set, else
// defaultTimeout (0 means none); a panic becomes a *PanicError; the call
// runs on the calling goroutine and is expected to honour ctx.
//
// Run's frame stays on the stack for as long as the tool runs, so it keeps
// only what it needs across the call and leaves the error texts to a
// helper.
func (b Bound) Run(ctx context.Context, defaultTimeout time.Duration) (res Result) {
	c := b.c
	if c == nil {
		return b.unbound()
	}
	name, timeout := c.about()
	if timeout <= 0 {
		timeout = defaultTimeout
	}
	callCtx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	defer func() {
		if v := recover(); v != nil {
			res = failure(name, &PanicError{Tool: name, Value: v, Stack: debug.Stack()}, max(res.Attempts, 1), 0, false)
		}
	}()
	out, attempts, err := c.call(callCtx)
	if err == nil {
		return Result{Content: out, Attempts: attempts}
	}
	return failure(name, err, attempts, timeout, timeout > 0 && ctx.Err() == nil && errors.Is(callCtx.Err(), context.DeadlineExceeded))
}

// unbound is the Result of a Bound that holds no call.
//
//go:noinline
func (b Bound) unbound() Result {
	if b.fail != nil {
		return *b.fail
	}
	return Result{Content: "tool call not bound", IsError: true, Err: fmt.Errorf("%w: the zero Bound", ErrUnknownTool)}
}

// failure is the Result of a call of the tool name that failed with err
// after attempts runs; timedOut says the call's own timeout ended it.
//
//go:noinline
func failure(name string, err error, attempts int, timeout time.Duration, timedOut bool) Result {
	var ae *ArgumentError
	var pe *PanicError
	switch {
	case errors.As(err, &ae):
		return Result{Content: ae.Error() + fixArgumentsHint, IsError: true, Err: ae}
	case errors.As(err, &pe):
		return Result{Content: fmt.Sprintf("tool %q failed: internal error", name), IsError: true, Err: pe, Attempts: attempts}
	case timedOut:
		msg := fmt.Sprintf("tool %q timed out after %s", name, timeout)
		return Result{Content: msg, IsError: true, Err: &timeoutError{msg: msg, cause: err}, Attempts: attempts}
	}
	return Result{Content: fmt.Sprintf("tool %q failed: %s", name, err), IsError: true, Err: err, Attempts: attempts}
}

// toolCall is a bound call of a tool not made by New: its Call validates
// and decodes when Run calls it.
type toolCall struct {
	t    Tool
	name string
	args json.RawMessage
}

func (c *toolCall) call(ctx context.Context) (string, int, error) {
	out, err := c.t.Call(ctx, c.args)
	return out, 1, err
}

func (c *toolCall) about() (string, time.Duration) { return c.name, SettingsOf(c.t).Timeout }

// funcCall is a bound call of a tool made by New: its arguments decoded.
type funcCall[In, Out any] struct {
	t  *funcTool[In, Out]
	in In
}

// call runs the function, retrying transient errors as configured.
func (c *funcCall[In, Out]) call(ctx context.Context) (string, int, error) {
	t := c.t
	delay := t.settings.RetryDelay
	for attempt := 1; ; attempt++ {
		out, err := t.invoke(ctx, c.in)
		if err == nil || attempt > t.settings.Retries || !IsTransient(err) {
			return out, attempt, err
		}
		if !sleep(ctx, delay) {
			return "", attempt, err
		}
		delay *= 2
	}
}

func (c *funcCall[In, Out]) about() (string, time.Duration) {
	return c.t.spec.Name, c.t.settings.Timeout
}

func (c *funcCall[In, Out]) decoded() {}

// bind validates and decodes args for a call of t.
func (t *funcTool[In, Out]) bind(args json.RawMessage) (boundCall, error) {
	if t.err != nil {
		return nil, t.err
	}
	c := &funcCall[In, Out]{t: t}
	if ae := t.schema.decode(args, &c.in); ae != nil {
		ae.Tool = t.spec.Name
		return nil, ae
	}
	return c, nil
}
