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
	Logger         *slog.Logger      // never nil from ExecContextFrom
}

type execContextKey struct{}

// WithExecContext returns a copy of ctx carrying ec.
func WithExecContext(ctx context.Context, ec ExecContext) context.Context {
	return context.WithValue(ctx, execContextKey{}, ec)
}

// ExecContextFrom returns the ExecContext stored in ctx, or the zero value.
// Its Logger is never nil: a logger that discards everything stands in when
// none was set.
func ExecContextFrom(ctx context.Context) ExecContext {
	ec, _ := ctx.Value(execContextKey{}).(ExecContext)
	if ec.Logger == nil {
		ec.Logger = slog.New(slog.DiscardHandler)
	}
	return ec
}
