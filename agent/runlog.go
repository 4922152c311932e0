package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
)

// idLen is the length of the IDs randomID writes: a 4-byte prefix and
// 12 random bytes in hex.
const idLen = 4 + 2*12

// randomID writes prefix (4 bytes) followed by 12 random bytes in hex
// into out: the IDs of parked Agent-Tools and approval requests ("agt_"),
// and of runs (Result.RunID, "run_").
func randomID(out *[idLen]byte, prefix string) {
	var raw [(idLen - 4) / 2]byte
	_, _ = rand.Read(raw[:])
	copy(out[:4], prefix)
	hex.Encode(out[4:], raw[:])
}

// newID is the ID of a parked Agent-Tool (and of its approval request).
func newID() string {
	var b [idLen]byte
	randomID(&b, "agt_")
	return string(b[:])
}

// Attribute keys every log line of a run carries.
const (
	logTenant       = "tenant"
	logConversation = "conversation"
	logRunID        = "run_id"
)

// runHandler is the slog.Handler of a run's logger: Config.Logger's
// handler, with the run's tenant, conversation and run ID put before the
// attributes of each line. It lives in the run (no allocation per run);
// the attributes are added when a line is written, so a run that writes
// none costs nothing.
type runHandler struct {
	inner            slog.Handler
	tenant, conv, id string
}

func (h *runHandler) attrs() []slog.Attr {
	return []slog.Attr{slog.String(logTenant, h.tenant), slog.String(logConversation, h.conv), slog.String(logRunID, h.id)}
}

func (h *runHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *runHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, rec.Message, rec.PC)
	out.AddAttrs(h.attrs()...)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(a)
		return true
	})
	return h.inner.Handle(ctx, out)
}

// WithAttrs and WithGroup (a tool deriving a logger from its
// ExecContext's) fix the run's attributes first, outside any group.
func (h *runHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return h.inner.WithAttrs(h.attrs()).WithAttrs(as)
}

func (h *runHandler) WithGroup(name string) slog.Handler {
	return h.inner.WithAttrs(h.attrs()).WithGroup(name)
}

// initLog gives the run its ID and its logger.
func (r *run) initLog() {
	var id [idLen]byte
	randomID(&id, "run_")
	r.res.RunID = string(id[:])
	r.logh = runHandler{inner: r.o.log.Handler(), tenant: r.msg.TenantID, conv: r.msg.ConversationID, id: r.res.RunID}
	r.logger = *slog.New(&r.logh)
}

// log is the run's logger: every line carries the run's tenant,
// conversation and run ID.
func (r *run) log() *slog.Logger { return &r.logger }

// extractionLog is the logger of a run's background fact extraction,
// with the same attributes as the run's.
func (o *Orchestrator) extractionLog(x extraction) *slog.Logger {
	return o.log.With(logTenant, x.tenant, logConversation, x.conv, logRunID, x.runID)
}
