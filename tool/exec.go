package tool

import (
	"context"
	"log/slog"

	"github.com/valetkit/valet/credentials"
)

// ExecContext is what a tool may know about the call it serves. The
// orchestrator puts it into the ctx passed to Call; tools read it with
// ExecContextFrom.
type ExecContext struct {
	TenantID       string
	ConversationID string
	CallID         string            // the model's tool-call id
	Credentials    credentials.Store // may be nil
	Logger         *slog.Logger      // never nil from ExecContextFrom: nil means slog.Default()
}

type execContextKey struct{}

// execCtx carries an ExecContext in one allocation (context.WithValue
// would take two: the context and the boxed struct). It runs on every tool
// call.
type execCtx struct {
	context.Context
	ec ExecContext
}

func (c *execCtx) Value(key any) any {
	if key == (execContextKey{}) {
		return &c.ec
	}
	return c.Context.Value(key)
}

func (c *execCtx) String() string { return "tool.ExecContext(" + c.ec.CallID + ")" }

// WithExecContext returns a copy of ctx carrying ec.
func WithExecContext(ctx context.Context, ec ExecContext) context.Context {
	return &execCtx{Context: ctx, ec: ec}
}

// ExecContextFrom returns the ExecContext stored in ctx, or the zero value.
// Its Logger is never nil: slog.Default() stands in when none was set, the
// rule of every valet package.
func ExecContextFrom(ctx context.Context) ExecContext {
	var ec ExecContext
	if p, ok := ctx.Value(execContextKey{}).(*ExecContext); ok {
		ec = *p
	}
	if ec.Logger == nil {
		ec.Logger = slog.Default()
	}
	return ec
}
