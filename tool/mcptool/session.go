package mcptool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxListedTools bounds the tools read from one listing: a server that
// pages forever cannot fill memory.
const maxListedTools = 1024

// session is one MCP session with the server: for a Command, one run of
// its process.
type session struct {
	cs     *mcp.ClientSession
	proc   *proc              // nil for a URL server
	cancel context.CancelFunc // ends the session's context
	done   chan struct{}      // closed when the session has ended
}

func (ss *session) alive() bool {
	select {
	case <-ss.done:
		return false
	default:
		return true
	}
}

// stop ends the session: the MCP close, then a Command's process group
// (stdin closed, then signals), and waits for it.
func (ss *session) stop(wg *sync.WaitGroup) {
	defer wg.Done()
	if ss.proc != nil && !ss.alive() {
		ss.proc.kill() // the session broke: nothing to say goodbye to
	}
	_ = ss.cs.Close()
	ss.cancel()
	if ss.proc != nil {
		ss.proc.terminate()
	}
	<-ss.done
}

// drop forgets a broken (or hung) session and stops it in the background;
// the next call or listing starts a new one. Close waits for the stop.
func (s *Set) drop(ss *session) {
	s.mu.Lock()
	if s.sess != ss {
		s.mu.Unlock()
		return
	}
	s.sess = nil
	s.dirty.Store(true) // list again with the next session
	s.stopping.Add(1)
	s.mu.Unlock()
	if ss.proc != nil {
		ss.proc.kill()
	}
	go ss.stop(&s.stopping)
}

// session returns a live session, starting one when there is none (or
// it broke). After a failed start, attempts wait Config.RetryDelay,
// doubling; meanwhile it fails at once.
func (s *Set) session(ctx context.Context, first bool) (*session, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if ss := s.sess; ss != nil && ss.alive() {
		s.mu.Unlock()
		return ss, nil
	}
	broken := s.sess
	s.mu.Unlock()
	if broken != nil {
		s.drop(broken)
	}

	select {
	case s.connMu <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.life.Done():
		return nil, ErrClosed
	}
	defer func() { <-s.connMu }()

	s.mu.Lock()
	switch ss := s.sess; {
	case s.closed:
		s.mu.Unlock()
		return nil, ErrClosed
	case ss != nil && ss.alive(): // another caller started it meanwhile
		s.mu.Unlock()
		return ss, nil
	case !first && time.Now().Before(s.retryAt):
		err := fmt.Errorf("%w: %q failed to start again (%v); next attempt in %s",
			ErrUnavailable, s.server.Name, s.lastErr, time.Until(s.retryAt).Round(100*time.Millisecond))
		s.mu.Unlock()
		return nil, err
	}
	again := s.gen > 0
	s.stopping.Add(1) // Close waits for this start to end
	s.mu.Unlock()
	defer s.stopping.Done()

	ss, list, err := s.dial(ctx)

	s.mu.Lock()
	if err != nil && s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	if err != nil {
		s.failures++
		d := s.cfg.RetryDelay << min(s.failures-1, 16)
		s.retryAt, s.lastErr = time.Now().Add(min(d, s.cfg.MaxRetryDelay)), err
		s.mu.Unlock()
		if again {
			s.log.Warn("mcptool: the server could not be started again", "err", err)
		}
		return nil, err
	}
	if s.closed {
		s.mu.Unlock()
		s.stopping.Add(1)
		ss.stop(&s.stopping)
		return nil, ErrClosed
	}
	s.sess, s.failures, s.lastErr = ss, 0, nil
	s.gen++
	s.st.apply(s, list)
	s.mu.Unlock()
	if again {
		s.log.Warn("mcptool: the server's session broke; started a new one")
	}
	return ss, nil
}

// dial starts the server (or reaches it), completes the handshake, lists
// its tools and compiles their schemas, all within Config.InitTimeout.
// Close cancels it. Called with connMu held.
func (s *Set) dial(ctx context.Context) (*session, []listedTool, error) {
	var (
		transport mcp.Transport
		p         *proc
	)
	if s.server.Command != "" {
		var err error
		if p, err = startProc(s.server, s.cfg.Stderr); err != nil {
			return nil, nil, fmt.Errorf("%w: %q: starting %s: %v", ErrUnavailable, s.server.Name, s.server.Command, err)
		}
		transport = &mcp.IOTransport{Reader: p.stdout, Writer: procWriter{p}, MaxLineLength: s.cfg.MaxMessageBytes}
	} else {
		hc := *s.cfg.HTTPClient
		base := hc.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		if len(s.server.Header) > 0 {
			base = headerTransport{base: base, header: s.server.Header}
		}
		hc.Transport = limitTransport{base: base, limit: s.cfg.MaxMessageBytes}
		transport = &mcp.StreamableClientTransport{Endpoint: s.server.URL, HTTPClient: &hc}
	}
	hctx, cancel := context.WithTimeout(ctx, s.cfg.InitTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)() // Close cancels the start
	// The session lives on its own context, ended (and a Command's
	// process killed) when the handshake's ends before the handshake and
	// the first listing are done, or when the session stops.
	life, endLife := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(hctx, func() {
		endLife()
		if p != nil {
			p.kill()
		}
	})
	client := mcp.NewClient(&mcp.Implementation{Name: "valet", Version: "1"}, &mcp.ClientOptions{
		Logger:       s.log,
		Capabilities: &mcp.ClientCapabilities{}, // no roots, sampling or elicitation
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.dirty.Store(true)
		},
	})
	fail := func(err error) (*session, []listedTool, error) {
		unhook()
		endLife()
		if p != nil {
			p.kill()
			p.terminate()
		}
		if s.life.Err() != nil {
			return nil, nil, ErrClosed
		}
		if hctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return nil, nil, fmt.Errorf("%w: %q did not complete initialize and list its tools within %s", ErrUnavailable, s.server.Name, s.cfg.InitTimeout)
		}
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, fmt.Errorf("%w: %q: %v", ErrUnavailable, s.server.Name, err)
	}
	cs, err := client.Connect(life, transport, nil)
	if err != nil {
		return fail(err)
	}
	ss := &session{cs: cs, proc: p, cancel: endLife, done: make(chan struct{})}
	go func() {
		_ = cs.Wait()
		close(ss.done)
	}()
	s.dirty.Store(false) // a change notified from here on lists again
	list, err := listTools(hctx, cs)
	var tools []listedTool
	if err == nil {
		tools, err = s.prepare(hctx, list)
	}
	if err != nil || !unhook() {
		if p != nil {
			p.kill()
		}
		_ = cs.Close()
		<-ss.done
		return fail(cmpErr(err, hctx.Err()))
	}
	return ss, tools, nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// listTools reads every page of the server's tools.
func listTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		if len(out) == maxListedTools {
			break
		}
		out = append(out, t)
	}
	return out, nil
}

// list lists the tools on a live session and updates what is offered.
func (s *Set) list(ctx context.Context, ss *session) error {
	select {
	case s.connMu <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.life.Done():
		return ErrClosed
	}
	defer func() { <-s.connMu }()
	lctx, cancel := context.WithTimeout(ctx, s.cfg.InitTimeout)
	defer cancel()
	defer context.AfterFunc(s.life, cancel)()
	s.dirty.Store(false)
	list, err := listTools(lctx, ss.cs)
	var tools []listedTool
	if err == nil {
		tools, err = s.prepare(lctx, list)
	}
	if err != nil {
		s.dirty.Store(true)
		if s.life.Err() != nil {
			return ErrClosed
		}
		if lctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return fmt.Errorf("%w: %q did not list its tools within %s", ErrUnavailable, s.server.Name, s.cfg.InitTimeout)
		}
		return fmt.Errorf("%w: %q: listing tools: %v", ErrUnavailable, s.server.Name, err)
	}
	s.mu.Lock()
	if s.sess == ss {
		s.st.apply(s, tools)
	}
	s.mu.Unlock()
	return nil
}

// headerTransport adds the Server's Header to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, vs := range t.header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return t.base.RoundTrip(req)
}

// sessionGone reports whether err says the session itself is gone (the
// connection closed, the server forgot the session), as opposed to an
// error answer to one request.
func sessionGone(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing)
}
