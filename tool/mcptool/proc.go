package mcptool

import (
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// How long a Command server gets to exit once its stdin is closed, and
// then once it is asked to terminate, before it is killed.
const (
	exitGrace      = 2 * time.Second
	terminateGrace = 2 * time.Second
)

// proc is one run of a Command server, in a process group of its own
// (on Unix) so that stopping it stops what it started too (npx starts
// node, which may start more).
type proc struct {
	cmd    *exec.Cmd
	stdin  *os.File // our end of its stdin
	stdout *os.File // our end of its stdout
	exited chan struct{}

	once   sync.Once
	killMu sync.Mutex
	killed bool
}

// inheritedEnv is what a Command server inherits of this process's
// environment: what finding programs, a home directory, temporary files
// and the locale need, never the rest (API keys, database URLs), which a
// server could read and hand to the model. The official MCP SDKs do the
// same.
func inheritedEnv() []string {
	var env []string
	for _, k := range []string{
		"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "LANG", "LC_ALL", "TZ",
		// Windows
		"APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATHEXT", "PROCESSOR_ARCHITECTURE",
		"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "TMP", "USERNAME", "USERPROFILE", "PROGRAMFILES", "COMSPEC",
	} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func startProc(s Server, stderr io.Writer) (*proc, error) {
	cmd := exec.Command(s.Command, s.Args...)
	cmd.Env = append(inheritedEnv(), s.Env...)
	cmd.Dir = s.Dir
	cmd.Stderr = stderr // nil: the null device
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	ownGroup(cmd)
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, stdin: inW, stdout: outR, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// kill stops the process group at once.
func (p *proc) kill() {
	p.killMu.Lock()
	defer p.killMu.Unlock()
	select {
	case <-p.exited:
		return
	default:
	}
	p.killed = true
	signalGroup(p.cmd, true)
}

// terminate closes the process's stdin (the MCP way to ask a stdio
// server to exit), waits exitGrace, asks the group to terminate, waits
// terminateGrace, then kills it; and waits for it to exit. Safe to call
// more than once.
func (p *proc) terminate() {
	p.once.Do(func() {
		p.stdin.Close()
		p.killMu.Lock()
		killed := p.killed
		p.killMu.Unlock()
		if !killed && !p.wait(exitGrace) {
			signalGroup(p.cmd, false)
			if !p.wait(terminateGrace) {
				p.kill()
			}
		}
		<-p.exited
		p.stdout.Close()
	})
	<-p.exited
}

func (p *proc) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// procWriter is the writing side of the stdio transport; closing it (the
// session's close) stops the process.
type procWriter struct{ p *proc }

func (w procWriter) Write(b []byte) (int, error) { return w.p.stdin.Write(b) }

func (w procWriter) Close() error {
	w.p.terminate()
	return nil
}
