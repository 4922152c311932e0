package pgdelegate_test

import (
	"io"
	"log/slog"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: River's clients
// stop when Run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
