package agenthttp

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/trigger"
)

// Defaults of Config; a zero field takes its default.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultKeepAlive    = 15 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultEventBuffer  = 32
)

// The runs GET …/tasks/{id}/runs returns: ?limit= defaults to
// DefaultRunsLimit and may be at most MaxRunsLimit.
const (
	DefaultRunsLimit = 50
	MaxRunsLimit     = 500
)

// ErrInvalidConfig is wrapped by New's error when the orchestrator or the
// Config cannot make a handler.
var ErrInvalidConfig = errors.New("agenthttp: invalid config")

// Config configures a Handler. Tenant is required; every other field is
// optional, and a zero field means its documented default.
type Config struct {
	// EventBuffer is how many events of a streamed run wait for a slow
	// client before the run itself waits (and, past WriteTimeout, is
	// cancelled). Default DefaultEventBuffer (32).
	EventBuffer int
	// KeepAlive is how often an SSE comment is written to a stream that
	// has had no event for that long, so proxies keep it open. Default
	// DefaultKeepAlive (15s).
	KeepAlive time.Duration
	// Logger receives what a client is not told: internal errors behind
	// a 500, a client dropped mid-stream. Default slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; a larger one is answered 413
	// and nothing runs. Default DefaultMaxBodyBytes (1 MiB).
	MaxBodyBytes int64
	// Prefix is the path the handler is mounted under ("/api"), without
	// a trailing slash; its routes are Prefix + "/conversations/...".
	// Default "": mount it at the root, or strip the prefix with
	// http.StripPrefix.
	Prefix string
	// Tasks is the trigger engine whose tasks the /tasks endpoints
	// manage. Default nil: those endpoints answer 404 not_configured.
	Tasks *trigger.Engine
	// Tenant returns the tenant of a request, from the host's own
	// authentication (a header its proxy sets, a verified JWT claim, a
	// session). Required. An error or an empty tenant answers 401 and
	// nothing runs; an error that is an *Error is answered as it says
	// (a 403, say). Its tenant is the only one the request can see or act
	// on.
	Tenant func(*http.Request) (string, error)
	// WriteTimeout bounds the write of one event (or keep-alive) of a
	// stream: a client that does not read it in time is dropped and its
	// run cancelled. Default DefaultWriteTimeout (10s).
	WriteTimeout time.Duration
}

// withDefaults checks c and returns it with every zero field set to its
// default: the one place defaults are applied.
func (c Config) withDefaults() (Config, error) {
	if c.Tenant == nil {
		return c, fmt.Errorf("%w: Config.Tenant is required: no endpoint may run without the host's tenant", ErrInvalidConfig)
	}
	if c.EventBuffer < 0 || c.KeepAlive < 0 || c.MaxBodyBytes < 0 || c.WriteTimeout < 0 {
		return c, fmt.Errorf("%w: EventBuffer, KeepAlive, MaxBodyBytes and WriteTimeout must not be negative", ErrInvalidConfig)
	}
	if c.Prefix != "" && (!strings.HasPrefix(c.Prefix, "/") || strings.HasSuffix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, "{} ")) {
		return c, fmt.Errorf("%w: Prefix %q must start with / and end without one, and hold no pattern", ErrInvalidConfig, c.Prefix)
	}
	c.EventBuffer = cmp.Or(c.EventBuffer, DefaultEventBuffer)
	c.KeepAlive = cmp.Or(c.KeepAlive, DefaultKeepAlive)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, DefaultWriteTimeout)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// New returns the handler serving o (and cfg.Tasks) over HTTP. It fails,
// wrapping ErrInvalidConfig, without an orchestrator or a Config.Tenant.
func New(o *agent.Orchestrator, cfg Config) (*Handler, error) {
	if o == nil {
		return nil, fmt.Errorf("%w: the orchestrator is nil", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Handler{o: o, cfg: cfg, mux: http.NewServeMux()}
	h.routes()
	return h, nil
}
