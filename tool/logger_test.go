package tool

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

// One rule for every valet package: no logger means slog.Default(). A
// tool called outside the orchestrator (a unit test, a host's own call)
// logs there, not into a discarding logger.
func TestExecContextLoggerDefaultsToSlogDefault(t *testing.T) {
	old := slog.Default()
	var b bytes.Buffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&b, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	ExecContextFrom(context.Background()).Logger.Warn("quota nearly spent")
	ExecContextFrom(WithExecContext(context.Background(), ExecContext{TenantID: "u1"})).Logger.Warn("second call")
	if got := b.String(); !strings.Contains(got, "quota nearly spent") || !strings.Contains(got, "second call") {
		t.Fatalf("slog.Default got %q", got)
	}
}
