package slogmin_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/valetkit/valet/internal/slogmin"
)

func TestRecordsBelowTheLevelAreDropped(t *testing.T) {
	var buf bytes.Buffer
	log := slogmin.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), slog.LevelWarn)
	log.Info("routine")
	log.With("k", "v").WithGroup("g").Warn("kept", "a", 1)
	log.Error("also kept")
	out := buf.String()
	if strings.Contains(out, "routine") {
		t.Errorf("an info line was passed on:\n%s", out)
	}
	if !strings.Contains(out, "kept k=v g.a=1") || !strings.Contains(out, "also kept") {
		t.Errorf("warnings and errors, with their attributes and groups, must pass:\n%s", out)
	}
}
