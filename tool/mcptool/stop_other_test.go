//go:build !unix

package mcptool

import (
	"os"
	"testing"
)

func stopProcess(t *testing.T, _ *os.Process) { t.Skip("needs SIGSTOP") }
