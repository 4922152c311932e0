// Package slogmin filters slog records below a level. valet's River
// backends hand River a logger that passes on only its warnings and
// errors, so that River's routine lines do not drown the host's log.
package slogmin

import (
	"context"
	"log/slog"
)

// New returns a logger writing to h only the records at min or above.
func New(h slog.Handler, min slog.Level) *slog.Logger {
	return slog.New(handler{h, min})
}

// handler passes on the records of at least a level.
type handler struct {
	slog.Handler
	min slog.Level
}

func (h handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h handler) WithAttrs(a []slog.Attr) slog.Handler {
	return handler{h.Handler.WithAttrs(a), h.min}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{h.Handler.WithGroup(name), h.min}
}
