package agent

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// Orchestrator runs the ReAct loop for every conversation of every tenant.
// It is safe for concurrent use: messages of one conversation are handled
// one after another, different conversations in parallel.
type Orchestrator struct {
	llm      llm.Client
	tools    *tool.Registry
	specs    []llm.ToolSpec
	ctxm     *agentctx.Manager
	loop     LoopConfig
	hooks    Hooks
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	loc      *time.Location
	persona  string // system prompt up to (excluding) the time line
	capsText string // capabilities paragraph
	prompt   atomic.Pointer[builtPrompt]

	agents   map[string]*agentTool // every registered Agent-Tool
	callable map[string]*agentTool // those the model sees as tools
	pool     pool.Store
	locker   pool.Locker

	mu    sync.Mutex
	convs map[convKey]*conversation
}

type convKey struct{ tenant, conv string }

// conversation is the in-memory state of one (tenant, conversation).
type conversation struct {
	sem     chan struct{} // held while a message of this conversation runs
	waiters int           // guarded by Orchestrator.mu: holders + those waiting
	// Guarded by sem: msgs[0] is the system prompt slot of the running
	// message, msgs[1:] the history; tokens is the history's token total.
	msgs   []llm.Message
	tokens int
	base   []llm.Message // msgs' backing array from its first slot (len = cap)
	dead   int           // slots of base before msgs, dropped by trims
}

// NewOrchestrator checks cfg and returns an orchestrator ready to handle
// messages.
func NewOrchestrator(cfg Config) (*Orchestrator, error) {
	if cfg.LLM == nil {
		return nil, ErrNoLLM
	}
	loop, err := cfg.Loop.withDefaults()
	if err != nil {
		return nil, err
	}
	reg, err := tool.NewRegistry(cfg.Tools...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	var agents, callable map[string]*agentTool
	if list := cfg.Agents.list(); len(list) > 0 {
		agents, callable = make(map[string]*agentTool, len(list)), make(map[string]*agentTool, len(list))
		for _, a := range list {
			agents[a.name] = a
			if a.opts.hidden {
				continue
			}
			callable[a.name] = a
			if err := reg.Add(agentProxy{a}); err != nil {
				return nil, fmt.Errorf("%w: Agent-Tool %q: %w", ErrInvalidConfig, a.name, err)
			}
		}
	}
	ctxm, err := agentctx.NewManager(agentctx.Config{
		TokenLimit:         loop.ContextTokenLimit,
		TrimThreshold:      loop.TrimThreshold,
		MaxHistoryMessages: loop.MaxHistoryMessages,
		MaxToolResultShare: loop.MaxToolResultShare,
		MaxToolResultChars: loop.MaxToolResultChars,
		CountTokens:        cfg.CountTokens,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	o := &Orchestrator{
		llm:   cfg.LLM,
		tools: reg,
		specs: reg.Specs(),
		ctxm:  ctxm,
		loop:  loop,
		hooks: cfg.Hooks,
		cfg:   cfg,
		log:   cfg.Logger,
		now:   cfg.Now,
		loc:   cfg.Location,
		convs: make(map[convKey]*conversation),

		agents:   agents,
		callable: callable,
		pool:     cfg.Pool,
		locker:   cfg.Locker,
	}
	if o.pool == nil {
		// On the orchestrator's clock, so a pinned Config.Now and the
		// pool agree about what has expired.
		o.pool = pool.NewMemoryWith(pool.MemoryOptions{Now: cfg.Now})
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.loc == nil {
		o.loc = time.UTC
	}
	o.persona = strings.TrimSpace(cfg.SystemPrompt)
	o.capsText = capabilities(reg)
	return o, nil
}

// HandleMessage handles one user message to the end: it runs the loop until
// the model answers and returns the Result. On failure the Result is still
// returned (Status error or cancelled) together with the error.
func (o *Orchestrator) HandleMessage(ctx context.Context, msg Message) (*Result, error) {
	r := o.newRun(ctx, msg, nil)
	return r.execute((*run).handle)
}

// Stream handles one user message like HandleMessage and yields its events
// as they happen: model text as it is written, tool calls as they start and
// end. The last event is always EventExecutionEnd carrying the Result, with
// a non-nil error when handling failed. Stopping the range early cancels
// the run.
func (o *Orchestrator) Stream(ctx context.Context, msg Message) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stopped := false
		emit := func(ev Event) bool {
			if stopped {
				return false
			}
			if !yield(ev, nil) {
				stopped = true
				cancel()
				return false
			}
			return true
		}
		r := o.newRun(ctx, msg, emit)
		res, err := r.execute((*run).handle)
		if !stopped {
			yield(Event{Type: EventExecutionEnd, Result: res}, err)
		}
	}
}

// acquire takes the conversation's turn, waiting for a message of the same
// conversation that is running, and returns the release func.
func (o *Orchestrator) acquire(ctx context.Context, key convKey) (*conversation, func(), error) {
	o.mu.Lock()
	c := o.convs[key]
	if c == nil {
		c = &conversation{sem: make(chan struct{}, 1)}
		o.convs[key] = c
	}
	c.waiters++
	o.mu.Unlock()

	done := func() {
		o.mu.Lock()
		c.waiters--
		if c.waiters == 0 && len(c.msgs) == 0 {
			delete(o.convs, key)
		}
		o.mu.Unlock()
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, nil, ctx.Err()
	}
	if o.locker == nil {
		return c, func() { <-c.sem; done() }, nil
	}
	// Other replicas may serve this conversation too.
	unlock, err := o.locker.Lock(ctx, lockKey(key))
	if err != nil {
		<-c.sem
		done()
		return nil, nil, fmt.Errorf("agent: locking the conversation: %w", err)
	}
	return c, func() { unlock(); <-c.sem; done() }, nil
}

// lockKey names a conversation for the Locker; the tenant's length comes
// first so no two (tenant, conversation) pairs share a key.
func lockKey(k convKey) string {
	return "conv:" + strconv.Itoa(len(k.tenant)) + ":" + k.tenant + ":" + k.conv
}

// History returns a copy of the stored history of a conversation: the
// user's messages, the model's answers and tool calls with their results.
func (o *Orchestrator) History(ctx context.Context, tenantID, conversationID string) ([]llm.Message, error) {
	c, release, err := o.acquire(ctx, convKey{tenantID, conversationID})
	if err != nil {
		return nil, err
	}
	defer release()
	return append([]llm.Message(nil), c.history()...), nil
}

// Tools returns the specs of the tools the model sees.
func (o *Orchestrator) Tools() []llm.ToolSpec { return append([]llm.ToolSpec(nil), o.specs...) }

// Forget drops the stored history of a conversation (for example when the
// user deletes it). It waits for a running message of that conversation.
func (o *Orchestrator) Forget(ctx context.Context, tenantID, conversationID string) error {
	c, release, err := o.acquire(ctx, convKey{tenantID, conversationID})
	if err != nil {
		return err
	}
	c.forget()
	release()
	return nil
}
