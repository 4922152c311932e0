package mcptool

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// A call the server does not answer within CallTimeout is an error
// result; the server still answers pings, so its session is kept and the
// next call works on it.
func TestCallTimeout(t *testing.T) {
	s := connect(t, helperServer("t"), Config{CallTimeout: 300 * time.Millisecond})
	reg := registry(t, s)
	before := s.sess
	res := run(reg, "t_sleep", `{}`)
	if !res.IsError || !errors.Is(res.Err, ErrTimeout) || !strings.Contains(res.Content, `MCP server "t" did not answer within 300ms`) {
		t.Fatalf("sleep: %+v", res)
	}
	if res := run(reg, "t_echo", `{"text":"after"}`); res.Content != "echo: after" {
		t.Fatalf("echo after a timeout: %+v", res)
	}
	if s.sess != before {
		t.Fatal("a slow tool restarted a server that answers pings")
	}
}

// A server that never answers initialize fails Connect with a clear error
// wrapping ErrUnavailable, and its command is stopped.
func TestNeverAnswersInitialize(t *testing.T) {
	for name, srv := range map[string]Server{
		"sleep":  {Name: "s", Command: "sleep", Args: []string{"60"}},
		"silent": {Name: "s", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: []string{helperEnv + "=silent"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := exec.LookPath(srv.Command); err != nil {
				t.Skip(err)
			}
			_, err := Connect(context.Background(), srv, Config{InitTimeout: 300 * time.Millisecond, Logger: quiet()})
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `"s" did not complete initialize and list its tools within 300ms`) {
				t.Fatalf("Connect: %v", err)
			}
		})
	}
}

// A command that does not exist, or a server that writes garbage, fails
// Connect with ErrUnavailable.
func TestConnectFailures(t *testing.T) {
	_, err := Connect(context.Background(), Server{Name: "x", Command: "/no/such/mcp-server"}, Config{Logger: quiet()})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "/no/such/mcp-server") {
		t.Fatalf("missing command: %v", err)
	}
	_, err = Connect(context.Background(), Server{Name: "x", Command: os.Args[0], Args: []string{"-test.run=^$"}, Env: []string{helperEnv + "=garbage"}},
		Config{InitTimeout: 2 * time.Second, Logger: quiet()})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("garbage output: %v", err)
	}
}

// A stdio server killed between calls: the next call errors or succeeds
// after starting the server again, never hangs, and a later call works
// on a new process. (A session cached after its server died, never
// started again, is a known bug of other SDKs.)
func TestKilledServerStartedAgain(t *testing.T) {
	s := connect(t, helperServer("t"), Config{CallTimeout: 10 * time.Second})
	reg := registry(t, s)
	if res := run(reg, "t_echo", `{"text":"one"}`); res.IsError {
		t.Fatal(res.Content)
	}
	old := s.sess.proc
	if err := old.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-old.exited
	res := run(reg, "t_echo", `{"text":"two"}`)
	if res.IsError && !errors.Is(res.Err, ErrUnavailable) {
		t.Fatalf("the call after the kill: %+v; want success or ErrUnavailable", res)
	}
	res = run(reg, "t_echo", `{"text":"three"}`)
	if res.IsError || res.Content != "echo: three" {
		t.Fatalf("a later call: %+v", res)
	}
	s.mu.Lock()
	now := s.sess.proc
	s.mu.Unlock()
	if now == old {
		t.Fatal("no new process")
	}
	// The tools are listed again on the new session and still offered.
	if ts, err := s.Tools(context.Background()); err != nil || len(ts) != reg.Len() {
		t.Fatalf("Tools after the restart: %d tools, %v; want %d", len(ts), err, reg.Len())
	}
}

// A killed server is noticed by Tools too: it starts the server again.
func TestToolsStartsKilledServerAgain(t *testing.T) {
	s := connect(t, helperServer("t"), Config{})
	old := s.sess
	_ = old.proc.cmd.Process.Kill()
	<-old.done // the session noticed
	ts, err := s.Tools(context.Background())
	if err != nil || len(ts) == 0 {
		t.Fatalf("Tools: %d tools, %v", len(ts), err)
	}
	if s.sess == old || s.sess.proc == old.proc {
		t.Fatal("Tools did not start a new session")
	}
}

// A server that stops answering everything (here: stopped with SIGSTOP)
// fails the call at CallTimeout, fails the ping, and is killed; the next
// call starts a new process. The timeouts leave a loaded machine room
// to start and initialise the new process within one call (at 300 ms
// the fresh call timed out under CI's load).
func TestHungServerStartedAgain(t *testing.T) {
	s := connect(t, helperServer("t"), Config{CallTimeout: 2 * time.Second, InitTimeout: 10 * time.Second})
	reg := registry(t, s)
	old := s.sess.proc
	stopProcess(t, old.cmd.Process)
	res := run(reg, "t_echo", `{"text":"hung"}`)
	if !errors.Is(res.Err, ErrTimeout) {
		t.Fatalf("call to a hung server: %+v", res)
	}
	res = run(reg, "t_echo", `{"text":"fresh"}`)
	if res.IsError || res.Content != "echo: fresh" {
		t.Fatalf("call after the hang: %+v", res)
	}
	<-old.exited
}

// A server that cannot be started again fails calls at once during the
// retry delay, with ErrUnavailable, and Tools returns an error the
// orchestrator logs.
func TestUnavailableServerFailsFast(t *testing.T) {
	dir := t.TempDir()
	bin := dir + "/server"
	if err := os.Symlink(os.Args[0], bin); err != nil {
		t.Skip(err)
	}
	srv := helperServer("t")
	srv.Command = bin
	s := connect(t, srv, Config{RetryDelay: time.Hour})
	reg := registry(t, s)
	_ = os.Remove(bin)
	old := s.sess
	_ = old.proc.cmd.Process.Kill()
	<-old.done
	res := run(reg, "t_echo", `{"text":"x"}`)
	if !errors.Is(res.Err, ErrUnavailable) || !strings.Contains(res.Content, "starting") {
		t.Fatalf("first call: %+v", res)
	}
	res = run(reg, "t_echo", `{"text":"x"}`)
	if !errors.Is(res.Err, ErrUnavailable) || !strings.Contains(res.Content, "next attempt in") {
		t.Fatalf("a call during the retry delay: %+v", res)
	}
	if _, err := s.Tools(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Tools: %v", err)
	}
}

// A Command server sees Server.Env and a few harmless variables of this
// process, never its secrets.
func TestCommandEnvironment(t *testing.T) {
	t.Setenv("VALET_TEST_SECRET", "hunter2")
	env := append(inheritedEnv(), "EXTRA=1")
	for _, kv := range env {
		if strings.Contains(kv, "hunter2") {
			t.Fatalf("the server would inherit %s", kv)
		}
	}
	if os.Getenv("PATH") != "" && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		t.Fatal("PATH is not inherited")
	}
	// The helper server gets its Env (it would not serve otherwise).
	s := connect(t, helperServer("t"), Config{})
	if len(s.st.offered) == 0 {
		t.Fatal("no tools")
	}
}
