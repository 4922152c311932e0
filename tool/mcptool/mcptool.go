package mcptool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valetkit/valet/tool"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrInvalidServer is wrapped when a Server cannot be used: no Name, a
	// Name that is not ^[a-zA-Z0-9_-]{1,32}$, or not exactly one of
	// Command and URL.
	ErrInvalidServer = errors.New("mcptool: invalid server")
	// ErrUnavailable is wrapped when the server cannot be reached: its
	// command does not start, it does not answer initialize within
	// Config.InitTimeout, its session broke, or it failed to start again
	// moments ago (the Set waits a little before the next attempt).
	ErrUnavailable = errors.New("mcptool: server unavailable")
	// ErrClosed is returned by a Set, and its tools, after Close.
	ErrClosed = errors.New("mcptool: set closed")
	// ErrHeldBack is wrapped by the error of a call to a tool whose
	// description, input schema or annotations changed on the server and
	// that the host has not accepted (see Set.Changed and Set.Accept).
	ErrHeldBack = errors.New("mcptool: tool changed on the server; held back until accepted")
	// ErrRefused is wrapped by the error of each Refusal: a tool the Set
	// does not offer because its name or schema cannot be used.
	ErrRefused = errors.New("mcptool: tool refused")
	// ErrNoChange is returned by Accept when the change it is given is not
	// the one held back for that tool (none is, or the server changed the
	// tool again since Changed was read).
	ErrNoChange = errors.New("mcptool: no such change held back")
	// ErrTimeout is wrapped by the error of a call the server did not
	// answer within Config.CallTimeout.
	ErrTimeout = errors.New("mcptool: call timed out")
)

// Defaults of Config; a zero field takes its default.
const (
	DefaultCallTimeout    = 60 * time.Second
	DefaultInitTimeout    = 30 * time.Second
	DefaultMaxResultBytes = 100_000
	// DefaultMaxDescriptionBytes is the longest tool description offered
	// to the model; a longer one is cut, saying so.
	DefaultMaxDescriptionBytes = 4 << 10
	// DefaultMaxSchemaBytes and DefaultMaxSchemaDepth bound a tool's input
	// schema (as JSON, and its nesting of objects and arrays); a tool whose
	// schema exceeds either is refused, before its schema is compiled.
	DefaultMaxSchemaBytes = 64 << 10
	DefaultMaxSchemaDepth = 32
	// DefaultMaxMessageBytes is the largest message read from a server
	// (the official SDK's own cap on a stdio message).
	DefaultMaxMessageBytes = 16 << 20
	// DefaultRetryDelay is the first wait after a failed attempt to start
	// the server again; it doubles up to DefaultMaxRetryDelay.
	DefaultRetryDelay    = time.Second
	DefaultMaxRetryDelay = time.Minute
)

// Server is how to reach one MCP server: a command speaking MCP over its
// stdin and stdout, or a streamable HTTP endpoint. It is a spec, not a
// connection, so a Set can start the server again when it dies.
type Server struct {
	// Name names the server; every tool's name starts with it and an
	// underscore ("fs_read_file"). Required, ^[a-zA-Z0-9_-]{1,32}$.
	Name string
	// Command is the program to run for a stdio server ("npx", "node",
	// "/usr/local/bin/my-server"), found in PATH like exec.Command does.
	// Exactly one of Command and URL is set.
	Command string
	// Args are the command's arguments.
	Args []string
	// Env holds the command's environment variables, "KEY=value". The
	// command inherits only PATH, HOME, USER, LOGNAME, SHELL, TERM,
	// TMPDIR, LANG, LC_ALL and TZ (and their Windows counterparts) from
	// this process, not its secrets; pass what the server needs here.
	// Values never appear in logs or errors.
	Env []string
	// Dir is the command's working directory. Default: this process's.
	Dir string
	// URL is the endpoint of a streamable HTTP server
	// ("http://localhost:3001/mcp"). It may appear in errors: put
	// secrets in Header, not in the URL.
	URL string
	// Header is sent with every HTTP request (an Authorization header, an
	// API key). Values never appear in logs or errors.
	Header http.Header
}

var serverNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)

func (s Server) check() error {
	if !serverNameRE.MatchString(s.Name) {
		return fmt.Errorf("%w: Name %q must match ^[a-zA-Z0-9_-]{1,32}$", ErrInvalidServer, s.Name)
	}
	if (s.Command == "") == (s.URL == "") {
		return fmt.Errorf("%w: %q: set exactly one of Command (stdio) and URL (streamable HTTP)", ErrInvalidServer, s.Name)
	}
	if s.URL != "" && (len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != "") {
		return fmt.Errorf("%w: %q: Args, Env and Dir are for a Command, not a URL", ErrInvalidServer, s.Name)
	}
	if s.Command != "" && len(s.Header) > 0 {
		return fmt.Errorf("%w: %q: Header is for a URL, not a Command", ErrInvalidServer, s.Name)
	}
	return nil
}

// Config adjusts a Set. The zero value is ready to use.
type Config struct {
	// CallTimeout bounds one tool call, on top of the caller's ctx (the
	// orchestrator's LoopConfig.ToolTimeout also bounds it). A server
	// that does not answer within it gives an error result, wrapping
	// ErrTimeout; if it does not answer a ping either, it is stopped and
	// started again on the next call. Default DefaultCallTimeout (60s).
	CallTimeout time.Duration
	// InitTimeout bounds starting the server and the MCP handshake
	// (initialize) with it, listing its tools and compiling their input
	// schemas; a later listing (after tools/list_changed) is bounded by it
	// too. Default DefaultInitTimeout (30s).
	InitTimeout time.Duration
	// MaxResultBytes caps the text of one result the model reads; a longer
	// result is cut and says so. Default DefaultMaxResultBytes (100 000).
	MaxResultBytes int
	// MaxDescriptionBytes caps a tool's description as offered to the
	// model, which reads it with every request: a longer one is cut and
	// ends with a note saying so, within the cap. Default
	// DefaultMaxDescriptionBytes (4 KiB).
	MaxDescriptionBytes int
	// MaxSchemaBytes and MaxSchemaDepth bound a tool's input schema: its
	// JSON size, and how deep objects and arrays nest in it. A tool whose
	// schema exceeds either is refused (Set.Refused says why) without
	// compiling the schema; the server's other tools stay usable.
	// Defaults DefaultMaxSchemaBytes (64 KiB) and DefaultMaxSchemaDepth
	// (32).
	MaxSchemaBytes int
	MaxSchemaDepth int
	// MaxMessageBytes caps one message read from the server: a line on a
	// Command's stdout, an HTTP response body or one event of an HTTP
	// event stream. A server that sends more fails the request, and its
	// session, which is started again on the next call; the rest of the
	// message is not read. Default DefaultMaxMessageBytes (16 MiB).
	MaxMessageBytes int
	// RetryDelay is the wait after a failed attempt to start the server
	// again, doubled after each further failure up to MaxRetryDelay; calls
	// meanwhile fail at once, wrapping ErrUnavailable. Defaults
	// DefaultRetryDelay (1s) and DefaultMaxRetryDelay (1m).
	RetryDelay    time.Duration
	MaxRetryDelay time.Duration
	// HTTPClient makes the requests to a URL server. Default: a client of
	// its own with no overall timeout (a session's event stream is long).
	HTTPClient *http.Client
	// Stderr receives what a Command server writes to its stderr. Default:
	// discarded.
	Stderr io.Writer
	// Logger receives warnings (a refused tool, a change held back, a
	// server started again). Default slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.CallTimeout < 0 || c.InitTimeout < 0 || c.MaxResultBytes < 0 || c.RetryDelay < 0 || c.MaxRetryDelay < 0 ||
		c.MaxDescriptionBytes < 0 || c.MaxSchemaBytes < 0 || c.MaxSchemaDepth < 0 || c.MaxMessageBytes < 0 {
		return c, errors.New("mcptool: Config fields must not be negative")
	}
	c.CallTimeout = cmp.Or(c.CallTimeout, DefaultCallTimeout)
	c.InitTimeout = cmp.Or(c.InitTimeout, DefaultInitTimeout)
	c.MaxResultBytes = cmp.Or(c.MaxResultBytes, DefaultMaxResultBytes)
	c.MaxDescriptionBytes = cmp.Or(c.MaxDescriptionBytes, DefaultMaxDescriptionBytes)
	c.MaxSchemaBytes = cmp.Or(c.MaxSchemaBytes, DefaultMaxSchemaBytes)
	c.MaxSchemaDepth = cmp.Or(c.MaxSchemaDepth, DefaultMaxSchemaDepth)
	c.MaxMessageBytes = cmp.Or(c.MaxMessageBytes, DefaultMaxMessageBytes)
	c.RetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay)
	c.MaxRetryDelay = max(cmp.Or(c.MaxRetryDelay, DefaultMaxRetryDelay), c.RetryDelay)
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Set is the tools of one MCP server as tool.Tools. It implements
// agent.ToolSource: put it in agent.Config.ToolSources and each run offers
// the model the tools the server lists at that time. It is safe for
// concurrent use. Close it when done: that stops a Command server.
type Set struct {
	server Server
	cfg    Config
	log    *slog.Logger

	// dirty is set by a tools/list_changed notification: the next Tools
	// lists the tools again.
	dirty atomic.Bool
	// connMu serialises connecting and listing (a channel, so waiting
	// honours ctx).
	connMu chan struct{}
	// stopping counts sessions being shut down, and starts in progress;
	// Close waits for them.
	stopping sync.WaitGroup
	// life ends when Close is called: it cancels a start in progress.
	life    context.Context
	endLife context.CancelFunc
	// schemas caches compiled input schemas by a hash of their JSON, so
	// that a listing that changed nothing compiles nothing; it holds those
	// of the last listing. Guarded by connMu.
	schemas map[[32]byte]compiled

	mu       sync.Mutex
	sess     *session // nil before the first connect and after one broke
	closed   bool
	gen      int       // sessions started so far
	failures int       // failed attempts in a row
	retryAt  time.Time // no attempt before this, after a failure
	lastErr  error     // of the last failed attempt

	st toolState // guarded by mu
}

// Connect starts (or reaches) the server, completes the MCP handshake
// within cfg.InitTimeout, lists its tools and returns them as a Set. A
// server that does not answer initialize in time fails Connect with an
// error wrapping ErrUnavailable, and its command is stopped.
//
// Every tool the server lists at Connect is offered, except those refused
// (see Set.Refused); a tool whose description, schema or annotations
// change later is held back until the host accepts the change.
func Connect(ctx context.Context, server Server, cfg Config) (*Set, error) {
	if err := server.check(); err != nil {
		return nil, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	server.Args = append([]string(nil), server.Args...)
	server.Env = append([]string(nil), server.Env...)
	server.Header = server.Header.Clone()
	s := &Set{
		server: server,
		cfg:    cfg,
		log:    cfg.Logger.With("mcp_server", server.Name),
		connMu: make(chan struct{}, 1),
	}
	s.life, s.endLife = context.WithCancel(context.Background())
	s.st.init()
	if _, err := s.session(ctx, true); err != nil {
		s.endLife()
		return nil, err
	}
	return s, nil
}

// Name returns the server's Name.
func (s *Set) Name() string { return s.server.Name }

// Tools returns the tools offered now, listing them again first when the
// server said its list changed or its session had to be started again.
// It returns the same slice while nothing changed. Without a session and
// unable to start one, it returns an error wrapping ErrUnavailable.
func (s *Set) Tools(ctx context.Context) ([]tool.Tool, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	live := s.sess != nil && s.sess.alive()
	offered := s.st.offered
	s.mu.Unlock()
	if live && !s.dirty.Load() {
		return offered, nil
	}
	if err := s.Refresh(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.offered, nil
}

// Refresh lists the server's tools now (starting it again if its session
// broke) and updates what Tools offers.
func (s *Set) Refresh(ctx context.Context) error {
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	sess, err := s.session(ctx, false)
	if err != nil {
		return err
	}
	s.mu.Lock()
	fresh := s.gen != gen // a new session: it has just listed the tools
	s.mu.Unlock()
	if fresh {
		return nil
	}
	if err := s.list(ctx, sess); err != nil {
		if !sess.alive() {
			// The session broke under the listing: one fresh start.
			s.drop(sess)
			_, err = s.session(ctx, false)
		}
		return err
	}
	return nil
}

// Close stops the session (and a Command server's process group) and
// waits for it to end. A start of the server in progress is cancelled
// and its process group stopped too; the Tools, Refresh or call waiting
// for it returns ErrClosed. Tools and calls then fail with ErrClosed.
func (s *Set) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	sess := s.sess
	s.sess = nil
	s.mu.Unlock()
	s.endLife()
	if sess != nil {
		s.stopping.Add(1)
		sess.stop(&s.stopping)
	}
	s.stopping.Wait()
	return nil
}
