//go:build unix

package mcptool_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/valetkit/valet/tool/mcptool"
)

// readPID waits for a pid file the server script writes when it starts.
func readPID(t *testing.T, path string) int {
	t.Helper()
	for range 500 {
		if b, err := os.ReadFile(path); err == nil && strings.HasSuffix(string(b), "\n") {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
	return 0
}

// Close "stops the session and a command's whole process group and
// waits for it to end". A server that died is started again by the next
// Tools; if that new process never answers initialize, Close called
// meanwhile must stop it too, not leave it running (and the Tools call
// blocked) until Config.InitTimeout.
func TestCloseStopsAServerBeingStartedAgain(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "1.pid"), filepath.Join(dir, "2.pid")
	// The first start serves; the next ones never answer.
	script := `if [ -e "$FIRST" ]; then echo $$ > "$SECOND"; exec env VALET_MCPTOOL_HELPER=silent "$BIN" -test.run='^$'; fi
echo $$ > "$FIRST"; exec env VALET_MCPTOOL_HELPER=serve "$BIN" -test.run='^$'`
	srv := mcptool.Server{Name: "s", Command: "/bin/sh", Args: []string{"-c", script},
		Env: []string{"FIRST=" + first, "SECOND=" + second, "BIN=" + os.Args[0], "GORACE=atexit_sleep_ms=0"}}
	const initTimeout = 6 * time.Second
	s, err := mcptool.Connect(context.Background(), srv, mcptool.Config{InitTimeout: initTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(readPID(t, first), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	toolsDone := make(chan error, 1)
	go func() {
		// The session breaks; Tools starts the server again.
		for {
			_, err := s.Tools(context.Background())
			if err != nil {
				toolsDone <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	pid2 := readPID(t, second)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	alive := syscall.Kill(pid2, 0) == nil
	if alive {
		t.Errorf("the server process being started again (pid %d) was still running when Close returned", pid2)
	}
	// The Tools call blocked in the new start ends by ErrClosed, not by
	// the InitTimeout that has nothing to do with Close.
	if err := <-toolsDone; !errors.Is(err, mcptool.ErrClosed) {
		t.Errorf("Tools blocked across Close returned %v, want ErrClosed", err)
	}
}
