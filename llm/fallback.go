package llm

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/valetkit/valet/clock"
)

// Defaults of FallbackConfig.
const (
	DefaultFallbackTries      = 2
	DefaultFallbackRetryDelay = 500 * time.Millisecond
	DefaultFallbackMaxWait    = 10 * time.Second
	DefaultFallbackStickFor   = time.Hour
	DefaultFallbackStickyMax  = 10000
)

// Errors of NewFallback.
var (
	// ErrFallbackSelf: the fallback list holds the primary, or one client
	// twice.
	ErrFallbackSelf = errors.New("llm: a fallback list holds its own primary or one client twice")
	// ErrFallbackConfig: a FallbackConfig is incomplete or has a negative
	// field.
	ErrFallbackConfig = errors.New("llm: invalid fallback config")
)

// FallbackConfig configures a [Fallback].
type FallbackConfig struct {
	// Primary is the client tried first. Required.
	Primary Client
	// Fallbacks are tried in order when the one before failed with an
	// error Switch accepts. At least one; none may be Primary, nor appear
	// twice.
	Fallbacks []Client
	// Names name the clients in logs, Observer steps and spans: Names[0]
	// the primary, Names[i] Fallbacks[i-1]. Default: the client's own
	// Model() when it has one (llm/openai's and llm/anthropic's do), else
	// "fallback[i]"; a name already taken by an earlier client gets "#i"
	// added ("gpt-4o", "gpt-4o#1").
	Names []string
	// Switch says whether an error moves the call to the next client.
	// Default: DefaultSwitch with MaxWait. Whatever it says, an error of
	// kind KindAuth, KindBadRequest or KindContextOverflow, or a
	// cancelled ctx, never switches: another model would not fix the
	// request, and an auth failure is the operator's to see.
	Switch func(err error) bool
	// MaxWait is the longest Retry-After of a rate limit that is waited
	// for (by the caller's retries) rather than switched away from.
	// Default DefaultFallbackMaxWait. Used by the default Switch only.
	MaxWait time.Duration
	// Tries is how many times a client is called on KindUnavailable (5xx,
	// overloaded, a broken connection) before the call moves on. Default
	// DefaultFallbackTries (one retry).
	Tries int
	// RetryDelay is the wait between those tries. Default
	// DefaultFallbackRetryDelay.
	RetryDelay time.Duration
	// NoStick turns stickiness off: every call starts at the primary.
	// Default false: a conversation (WithConversation in the ctx) stays on
	// the client that last answered it, for StickFor.
	NoStick bool
	// StickFor is how long a conversation stays on the client that
	// answered after a switch before the primary is tried again. Default
	// DefaultFallbackStickFor.
	StickFor time.Duration
	// StickyMax bounds the conversations remembered (least recently used
	// forgotten first). Default DefaultFallbackStickyMax.
	StickyMax int
	// Logger receives a WARN line per switch when the ctx carries no
	// switch hook (WithSwitchHook; valet's orchestrator sets one and logs
	// through its run logger). Default slog.Default().
	Logger *slog.Logger
	// Clock times RetryDelay and StickFor. Default clock.System.
	Clock clock.Clock
}

// Switch is one move of a [Fallback] from a client that failed to the
// next one.
type Switch struct {
	From, To string // the clients' names (FallbackConfig.Names)
	Err      error  // why From was left
}

// DefaultSwitch is the default FallbackConfig.Switch: an unavailable
// model (5xx, overloaded, a broken connection; after Tries) or a rate limit
// whose Retry-After is unknown or longer than maxWait.
func DefaultSwitch(err error, maxWait time.Duration) bool {
	switch KindOf(err) {
	case KindUnavailable:
		return true
	case KindRateLimited:
		ra := RetryAfter(err)
		return ra == 0 || ra > maxWait
	}
	return false
}

// Fallback is a Client that calls its primary and, when that fails with an
// error its Switch accepts, the next client of its list. A switch is never
// silent: it is reported to the ctx's switch hook (WithSwitchHook) or
// logged at WARN, and the Response's Model names the model that answered
// (set to the client's Model(), else its name, when the client left it
// empty).
// A stream switches only before its first chunk.
//
// A conversation (WithConversation) stays on the client that answered it
// (see NoStick, StickFor). Fallback is safe for concurrent use.
type Fallback struct {
	clients []Client
	names   []string
	models  []string // what a response that names no model is given: the client's Model(), else its name
	sw      func(error) bool
	tries   int
	delay   time.Duration
	stick   bool
	stickD  time.Duration
	max     int
	log     *slog.Logger
	clk     clock.Clock

	mu     sync.Mutex
	sticky map[string]*list.Element
	lru    list.List // of *stuck, most recent first
}

type stuck struct {
	key   string
	i     int
	until time.Time
}

// NewFallback returns a Fallback over cfg's clients.
func NewFallback(cfg FallbackConfig) (*Fallback, error) {
	if cfg.Primary == nil || len(cfg.Fallbacks) == 0 {
		return nil, fmt.Errorf("%w: a primary and at least one fallback are required", ErrFallbackConfig)
	}
	if cfg.MaxWait < 0 || cfg.Tries < 0 || cfg.RetryDelay < 0 || cfg.StickFor < 0 || cfg.StickyMax < 0 {
		return nil, fmt.Errorf("%w: MaxWait, Tries, RetryDelay, StickFor and StickyMax must not be negative", ErrFallbackConfig)
	}
	clients := append([]Client{cfg.Primary}, cfg.Fallbacks...)
	if len(cfg.Names) != 0 && len(cfg.Names) != len(clients) {
		return nil, fmt.Errorf("%w: %d names for %d clients", ErrFallbackConfig, len(cfg.Names), len(clients))
	}
	for i, c := range clients {
		if c == nil {
			return nil, fmt.Errorf("%w: fallback %d is nil", ErrFallbackConfig, i)
		}
		for j := range i {
			if overlaps(clients[j], c) {
				if j == 0 {
					return nil, fmt.Errorf("%w: fallback %d is the primary", ErrFallbackSelf, i)
				}
				return nil, fmt.Errorf("%w: fallbacks %d and %d are the same client", ErrFallbackSelf, j, i)
			}
		}
	}
	f := &Fallback{
		clients: clients,
		names:   make([]string, len(clients)),
		tries:   cfg.Tries,
		delay:   cfg.RetryDelay,
		stick:   !cfg.NoStick,
		stickD:  cfg.StickFor,
		max:     cfg.StickyMax,
		log:     cfg.Logger,
		clk:     clock.Or(cfg.Clock),
		sticky:  map[string]*list.Element{},
	}
	for i, c := range clients {
		switch {
		case len(cfg.Names) != 0 && cfg.Names[i] != "":
			f.names[i] = cfg.Names[i]
		default:
			if m, ok := c.(interface{ Model() string }); ok && m.Model() != "" {
				f.names[i] = m.Model()
			} else {
				f.names[i] = "fallback[" + strconv.Itoa(i) + "]"
			}
		}
		f.models = append(f.models, f.names[i])
		if m, ok := c.(interface{ Model() string }); ok && m.Model() != "" {
			f.models[i] = m.Model()
		}
		if slices.Contains(f.names[:i], f.names[i]) { // one model behind two endpoints or keys
			f.names[i] += "#" + strconv.Itoa(i)
		}
	}
	if f.tries == 0 {
		f.tries = DefaultFallbackTries
	}
	if f.delay == 0 {
		f.delay = DefaultFallbackRetryDelay
	}
	if f.stickD == 0 {
		f.stickD = DefaultFallbackStickFor
	}
	if f.max == 0 {
		f.max = DefaultFallbackStickyMax
	}
	maxWait := cfg.MaxWait
	if maxWait == 0 {
		maxWait = DefaultFallbackMaxWait
	}
	f.sw = cfg.Switch
	if f.sw == nil {
		f.sw = func(err error) bool { return DefaultSwitch(err, maxWait) }
	}
	return f, nil
}

// sameClient reports whether a and b are the same client. Clients of
// types that cannot be compared (a func or map type) are never the same.
func sameClient(a, b Client) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// overlaps reports whether a and b are the same client, or one is an
// llm.Fallback holding the other (at any depth): a model the chain just
// found down must not be called again as a later fallback.
func overlaps(a, b Client) bool {
	if sameClient(a, b) {
		return true
	}
	if fa, ok := a.(*Fallback); ok {
		for _, c := range fa.clients {
			if overlaps(c, b) {
				return true
			}
		}
	}
	if fb, ok := b.(*Fallback); ok {
		for _, c := range fb.clients {
			if overlaps(a, c) {
				return true
			}
		}
	}
	return false
}

// triesOf is how many times client i is called on KindUnavailable: once
// for a nested Fallback, which retries its own clients already.
func (f *Fallback) triesOf(i int) int {
	if _, ok := f.clients[i].(*Fallback); ok {
		return 1
	}
	return f.tries
}

// Model returns the primary's name (FallbackConfig.Names).
func (f *Fallback) Model() string { return f.names[0] }

// Models returns the model of each client the Fallback may call, the
// primary's first: the client's Model(), else its name. A spend guard
// prices a call's reservation at the dearest of them (agent does), since
// any one may answer it. The slice is the caller's.
func (f *Fallback) Models() []string { return slices.Clone(f.models) }

// Complete calls the clients in turn until one answers or fails with an
// error that does not switch. The last error is returned when every
// client failed.
//
// A call begins at the client its conversation is stuck to (or the
// primary) and moves on through the others in order, wrapping around to
// the primary: a conversation stuck to a fallback that fails in turn goes
// back to the primary rather than failing.
func (f *Fallback) Complete(ctx context.Context, req Request) (*Response, error) {
	s := f.start(ctx)
	for n := 0; ; n++ {
		i := (s + n) % len(f.clients)
		resp, err := f.complete(ctx, i, req)
		if err == nil {
			if resp != nil && resp.Model == "" {
				resp.Model = f.models[i]
			}
			f.answered(ctx, i)
			return resp, nil
		}
		if n+1 >= len(f.clients) || !f.next(ctx, i, (s+n+1)%len(f.clients), err) {
			return nil, err
		}
	}
}

func (f *Fallback) complete(ctx context.Context, i int, req Request) (*Response, error) {
	for try := 1; ; try++ {
		resp, err := f.clients[i].Complete(ctx, req)
		if err == nil || try >= f.triesOf(i) || KindOf(err) != KindUnavailable || !f.wait(ctx) {
			return resp, err
		}
	}
}

// Stream streams from the clients in turn, moving on only while nothing
// was yielded: once a chunk is out, an error ends the stream.
func (f *Fallback) Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		s := f.start(ctx)
		i, n, try := s, 0, 1
		for {
			yielded, err := false, error(nil)
			for c, e := range f.clients[i].Stream(ctx, req) {
				if e != nil {
					err = e
					break
				}
				if c.Response != nil && c.Response.Model == "" {
					r := *c.Response
					r.Model = f.models[i]
					c.Response = &r
				}
				if c.Response != nil {
					f.answered(ctx, i)
				}
				yielded = true
				if !yield(c, nil) {
					return
				}
			}
			if err == nil || yielded {
				if err != nil {
					yield(Chunk{}, err)
				}
				return
			}
			if try < f.triesOf(i) && KindOf(err) == KindUnavailable && f.wait(ctx) {
				try++
				continue
			}
			to := (s + n + 1) % len(f.clients)
			if n+1 >= len(f.clients) || !f.next(ctx, i, to, err) {
				yield(Chunk{}, err)
				return
			}
			i, n, try = to, n+1, 1
		}
	}
}

// wait sleeps RetryDelay; false when ctx ended first.
func (f *Fallback) wait(ctx context.Context) bool {
	t := f.clk.NewTimer(f.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

// next reports whether the call moves from client i to client to after
// err, and reports the switch.
func (f *Fallback) next(ctx context.Context, i, to int, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch KindOf(err) {
	case KindAuth, KindBadRequest, KindContextOverflow:
		return false
	}
	if !f.sw(err) {
		return false
	}
	s := Switch{From: f.names[i], To: f.names[to], Err: err}
	if h, ok := ctx.Value(switchHookKey{}).(func(Switch)); ok && h != nil {
		h(s)
	} else {
		log := f.log
		if log == nil {
			log = slog.Default()
		}
		log.WarnContext(ctx, "llm: model failed, falling back", "from", s.From, "to", s.To, "kind", KindOf(err).String(), "err", err.Error())
	}
	return true
}

// start returns the index of the client a call begins with.
func (f *Fallback) start(ctx context.Context) int {
	if !f.stick {
		return 0
	}
	key, _ := ctx.Value(conversationKey{}).(string)
	if key == "" {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.sticky[key]
	if !ok {
		return 0
	}
	s := e.Value.(*stuck)
	if !f.clk.Now().Before(s.until) {
		f.lru.Remove(e)
		delete(f.sticky, key)
		return 0
	}
	f.lru.MoveToFront(e)
	return s.i
}

// answered remembers that client i answered the ctx's conversation.
func (f *Fallback) answered(ctx context.Context, i int) {
	if !f.stick {
		return
	}
	key, _ := ctx.Value(conversationKey{}).(string)
	if key == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.sticky[key]
	if i == 0 {
		if ok {
			f.lru.Remove(e)
			delete(f.sticky, key)
		}
		return
	}
	if ok {
		s := e.Value.(*stuck)
		if s.i != i {
			s.i, s.until = i, f.clk.Now().Add(f.stickD)
		}
		f.lru.MoveToFront(e)
		return
	}
	f.sticky[key] = f.lru.PushFront(&stuck{key: key, i: i, until: f.clk.Now().Add(f.stickD)})
	for f.lru.Len() > f.max {
		old := f.lru.Back()
		f.lru.Remove(old)
		delete(f.sticky, old.Value.(*stuck).key)
	}
}

type (
	switchHookKey   struct{}
	conversationKey struct{}
)

// WithSwitchHook returns ctx carrying h, which a [Fallback] calls, in the
// caller's goroutine, for each switch made by a call with that ctx,
// instead of logging it. valet's orchestrator sets one per run: it logs
// the switch at WARN through the run's logger, tells the Observer
// (agent.StepModelFallback) and adds a span event.
func WithSwitchHook(ctx context.Context, h func(Switch)) context.Context {
	return context.WithValue(ctx, switchHookKey{}, h)
}

// WithConversation returns ctx naming the conversation a call belongs to,
// so that a [Fallback] keeps a conversation on the client that answered
// it. valet's orchestrator sets the tenant and conversation.
func WithConversation(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, conversationKey{}, key)
}
