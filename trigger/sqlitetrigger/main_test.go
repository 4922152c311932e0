package sqlitetrigger_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives the tests: River's clients
// stop with their engines. A child process of the kill tests is killed,
// not stopped, so it is not checked.
func TestMain(m *testing.M) {
	if os.Getenv(childFile) != "" {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}
