package mcptool

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/tool"
)

// The reference MCP servers (nobody here wrote them) run from the npm
// packages .ci/run installs into $VALET_TEST_MCP at pinned versions.
const mcpEnv = "VALET_TEST_MCP"

// referenceServer returns the command line of a reference server's
// entry point, skipping the test when the packages are not installed.
func referenceServer(t *testing.T, pkg string) (node, script string) {
	t.Helper()
	dir := os.Getenv(mcpEnv)
	if dir == "" {
		t.Skipf("%s is not set: run .ci/run, which installs the reference MCP servers with npm and sets it", mcpEnv)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("%s is set but node is not in PATH: %v", mcpEnv, err)
	}
	script = filepath.Join(dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("%s is set but %s is missing: %v", mcpEnv, script, err)
	}
	return node, script
}

func everythingStdio(t *testing.T) Server {
	node, script := referenceServer(t, "server-everything")
	return Server{Name: "ev", Command: node, Args: []string{script, "stdio"}}
}

// The "everything" reference server over stdio: its tools offered and
// called, arguments checked against its schemas, results of each kind
// rendered, risk from its annotations.
func TestEverythingServerStdio(t *testing.T) {
	s := connect(t, everythingStdio(t), Config{})
	checkEverything(t, s)
	if r := s.Refused(); len(r) != 0 {
		t.Errorf("refused %+v", r)
	}
}

func checkEverything(t *testing.T, s *Set) {
	t.Helper()
	reg := registry(t, s)
	for _, name := range []string{"ev_echo", "ev_get-sum", "ev_get-tiny-image", "ev_get-structured-content"} {
		if _, ok := reg.Get(name); !ok {
			t.Fatalf("%s not offered; offered %v", name, reg.Names())
		}
	}
	if res := run(reg, "ev_echo", `{"message":"hello"}`); res.IsError || res.Content != "Echo: hello" {
		t.Fatalf("echo: %+v", res)
	}
	if res := run(reg, "ev_get-sum", `{"a":2,"b":3}`); res.IsError || !strings.Contains(res.Content, "5") {
		t.Fatalf("get-sum: %+v", res)
	}
	var ae *tool.ArgumentError
	if res := run(reg, "ev_get-sum", `{"a":"two"}`); !errors.As(res.Err, &ae) {
		t.Fatalf("get-sum with bad arguments: %+v; want an ArgumentError before the call", res)
	}
	res := run(reg, "ev_get-tiny-image", `{}`)
	if res.IsError || !strings.Contains(res.Content, "[image: image/png,") || len(res.Content) > 2000 {
		t.Fatalf("get-tiny-image: %d bytes: %.300s", len(res.Content), res.Content)
	}
	res = run(reg, "ev_get-structured-content", `{"location":"New York"}`)
	if res.IsError || !strings.Contains(res.Content, "temperature") {
		t.Fatalf("get-structured-content: %+v", res)
	}
	echo, _ := reg.Get("ev_echo")
	if r := tool.SettingsOf(echo).Risk; r != tool.RiskLow {
		t.Errorf("echo (read-only): risk %s", r)
	}
}

// The "everything" server killed between calls is started again.
func TestEverythingServerKilled(t *testing.T) {
	s := connect(t, everythingStdio(t), Config{})
	reg := registry(t, s)
	old := s.sess.proc
	_ = old.cmd.Process.Kill()
	<-old.exited
	res := run(reg, "ev_echo", `{"message":"after kill"}`)
	t.Logf("the first call after the kill: %q", res.Content)
	if res.IsError && !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("the call after the kill: %+v", res)
	}
	if res := run(reg, "ev_echo", `{"message":"later"}`); res.IsError || res.Content != "Echo: later" {
		t.Fatalf("a later call: %+v", res)
	}
}

// everythingHTTP starts the "everything" server in its streamable HTTP
// mode on a free port and returns its URL and a function that stops it.
func everythingHTTP(t *testing.T, port int) (url string, stop func()) {
	t.Helper()
	node, script := referenceServer(t, "server-everything")
	cmd := exec.Command(node, script, "streamableHttp")
	cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop = func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(stop)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("the everything server exited before listening on %s", addr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the everything server does not listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "http://" + addr + "/mcp", stop
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The "everything" server over streamable HTTP; restarted behind the same
// URL, it no longer knows the session: calls recover on a new session
// instead of failing forever on the stale one.
func TestEverythingServerHTTP(t *testing.T) {
	port := freePort(t)
	url, stop := everythingHTTP(t, port)
	s := connect(t, Server{Name: "ev", URL: url}, Config{})
	checkEverything(t, s)

	stop()
	everythingHTTP(t, port)
	reg := registry(t, s)
	res := run(reg, "ev_echo", `{"message":"after restart"}`)
	t.Logf("the first call after the restart: %q", res.Content)
	if res.IsError && !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("the first call after the restart: %+v", res)
	}
	for _, m := range []string{"one", "two"} {
		if res := run(reg, "ev_echo", `{"message":"`+m+`"}`); res.IsError || res.Content != "Echo: "+m {
			t.Fatalf("a later call: %+v", res)
		}
	}
}

// The filesystem reference server on a temporary directory: files read
// and written through it, its refusal of a path outside the directory an
// error result, risk from its annotations.
func TestFilesystemServer(t *testing.T) {
	node, script := referenceServer(t, "server-filesystem")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := connect(t, Server{Name: "fs", Command: node, Args: []string{script, dir}}, Config{})
	reg := registry(t, s)
	path := filepath.Join(dir, "notes.txt")
	if res := run(reg, "fs_read_text_file", fmt.Sprintf(`{"path":%q}`, path)); res.IsError || res.Content != "buy milk\n" {
		t.Fatalf("read_text_file: %+v", res)
	}
	out := filepath.Join(dir, "out.txt")
	if res := run(reg, "fs_write_file", fmt.Sprintf(`{"path":%q,"content":"written by valet"}`, out)); res.IsError {
		t.Fatalf("write_file: %+v", res)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != "written by valet" {
		t.Fatalf("out.txt: %q, %v", b, err)
	}
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if res := run(reg, "fs_read_text_file", fmt.Sprintf(`{"path":%q}`, outside)); !res.IsError || !errors.Is(res.Err, ErrToolFailed) {
		t.Fatalf("a path outside the directory: %+v", res)
	}
	for name, want := range map[string]tool.Risk{"fs_read_text_file": tool.RiskLow, "fs_write_file": tool.RiskHigh} {
		tl, ok := reg.Get(name)
		if !ok {
			t.Fatalf("%s not offered: %v", name, reg.Names())
		}
		if got := tool.SettingsOf(tl).Risk; got != want {
			t.Errorf("%s: risk %s, want %s", name, got, want)
		}
	}
	if r := s.Refused(); len(r) != 0 {
		t.Errorf("refused %+v", r)
	}
}

// The everything server's get-env tool shows the model the server's
// environment: this process's secrets are not in it, Server.Env is.
func TestEverythingServerSeesNoSecrets(t *testing.T) {
	srv := everythingStdio(t)
	t.Setenv("VALET_TEST_SECRET", "hunter2")
	srv.Env = []string{"GIVEN_TO_SERVER=yes"}
	reg := registry(t, connect(t, srv, Config{}))
	res := run(reg, "ev_get-env", `{}`)
	if res.IsError || !strings.Contains(res.Content, "GIVEN_TO_SERVER") || strings.Contains(res.Content, "hunter2") {
		t.Fatalf("get-env: %.500s", res.Content)
	}
}
