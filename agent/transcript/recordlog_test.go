package transcript_test

import (
	"context"
	"log/slog"
	"sync"
)

// recordLog keeps every record written through it, as attribute strings
// (and "level", "msg").
type recordLog struct {
	mu   *sync.Mutex
	recs *[]map[string]string
}

func newRecordLog() recordLog { return recordLog{mu: new(sync.Mutex), recs: new([]map[string]string)} }

func (h recordLog) Enabled(context.Context, slog.Level) bool { return true }

func (h recordLog) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"level": r.Level.String(), "msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, m)
	return nil
}

func (h recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h recordLog) WithGroup(string) slog.Handler      { return h }

func (h recordLog) records() []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]map[string]string(nil), *h.recs...)
}
