package pgdelegate_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: River's clients
// stop when Run returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
