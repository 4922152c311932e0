package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valetkit/valet/clock"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// Orchestrator runs the ReAct loop for every conversation of every tenant.
// It is safe for concurrent use: messages of one conversation are handled
// one after another, different conversations in parallel.
type Orchestrator struct {
	llm         llm.Client
	tools       *tool.Registry
	specs       []llm.ToolSpec
	ctxm        *agentctx.Manager
	loop        LoopConfig
	hooks       Hooks
	cfg         Config
	log         *slog.Logger
	obs         Observer    // Config.Observer; nil when none
	obsPanicked atomic.Bool // the Observer's first panic was logged
	fallbacks   bool        // a client may be an llm.Fallback: model calls carry its hook (fallback.go)
	tel         *telemetry  // OpenTelemetry; nil without providers (telemetry.go)
	clock       clock.Clock
	loc         *time.Location
	persona     string // system prompt up to (excluding) the time line
	capsText    string // capabilities paragraph
	prompt      atomic.Pointer[builtPrompt]

	agents   map[string]*agentTool // every registered Agent-Tool
	callable map[string]*agentTool // those the model sees as tools
	spawn    *spawner              // Config.SubAgents; nil when off (spawn.go)
	riskPark bool                  // a plain tool call may wait for approval (risk.go)
	pool     pool.Store
	locker   pool.Locker

	mem     memory.Provider
	memOpts MemoryOptions
	bufs    sync.Pool // of *buffers

	convFree sync.Pool // of unused *conversation

	prices     Prices // DefaultPrices with Config.Prices over them
	model      string // the client's model, when it names it
	price      Price  // the client's model's price
	priced     bool
	specTokens int // tokens of the tool specs, sent with each call
	guard      SpendGuard
	bg         bgWork // fact extraction after replies

	// srcCache: the last tool set built from Config.ToolSources.
	srcCache sourceCache

	// scales: how the model counted each tenant's input against the
	// estimate in its last reported call, for planning token and cost
	// budgets across runs (budgetscale.go).
	scales usageScales

	mu    sync.Mutex
	convs map[convKey]*conversation // those with a message running or waiting

	control Control // Config.Control, or a MemoryControl (steer.go)
}

type convKey struct{ tenant, conv string }

// conversation serialises the messages of one (tenant, conversation) in
// this process; its history lives in the memory provider.
type conversation struct {
	sem     chan struct{} // held while a message of this conversation runs
	waiters int           // guarded by Orchestrator.mu: holders + those waiting
	unlock  func()        // the Locker's, while held (guarded by sem)
}

// NewOrchestrator checks cfg and returns an orchestrator ready to handle
// messages. A cost limit on a model Config.Prices does not price (a
// LoopConfig.Budget.MaxCostUSD, or a SpendLimits with dollar limits as
// the SpendGuard) is refused here, wrapping ErrInvalidConfig and
// ErrNoPrice; so is a LoopConfig.Budget.MaxTokens no model call fits
// (see CheckBudget), wrapping ErrInvalidConfig and ErrInvalidBudget.
func NewOrchestrator(cfg Config) (*Orchestrator, error) {
	if err := cfg.routeDefault(); err != nil { // router.go
		return nil, err
	}
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
	spawn, err := newSpawner(cfg.SubAgents, reg, cfg.Skills)
	if err != nil {
		return nil, err
	}
	if err := addPlanTool(cfg.Plan, reg); err != nil { // plan.go
		return nil, err
	}
	if err := checkPrices(cfg.Prices); err != nil {
		return nil, err
	}
	memOpts, err := cfg.MemoryOptions.withDefaults()
	if err != nil {
		return nil, err
	}
	ctxm, err := agentctx.NewManager(agentctx.Config{
		TokenLimit:         loop.ContextTokenLimit,
		TrimThreshold:      loop.TrimThreshold,
		MaxHistoryMessages: cmp.Or(compactQuota(loop), loop.MaxHistoryMessages),
		MaxToolResultShare: loop.MaxToolResultShare,
		MaxToolResultChars: loop.MaxToolResultChars,
		CountTokens:        cfg.CountTokens,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	o := &Orchestrator{
		llm:       cfg.LLM,
		tools:     reg,
		specs:     reg.Specs(),
		ctxm:      ctxm,
		loop:      loop,
		hooks:     cfg.Hooks,
		obs:       observerOf(cfg.Observer),
		fallbacks: mayFallBack(cfg),
		cfg:       cfg,
		log:       cfg.Logger,
		loc:       cfg.Location,
		convs:     make(map[convKey]*conversation),
		clock:     clock.Or(cfg.Clock),

		agents:   agents,
		callable: callable,
		spawn:    spawn,
		pool:     cfg.Pool,
		locker:   cfg.Locker,
		mem:      cfg.Memory,
		memOpts:  memOpts,
	}
	o.riskPark = mayParkRisky(cfg, reg) // risk.go
	if o.mem == nil {
		m, err := memory.NewInMemory(memory.Config{Clock: o.clock})
		if err != nil {
			return nil, fmt.Errorf("the default memory: %w", err)
		}
		o.mem = m
	}
	o.prices = DefaultPrices()
	maps.Copy(o.prices, cfg.Prices)
	if m, ok := cfg.LLM.(interface{ Model() string }); ok {
		o.model = m.Model()
		o.price, o.priced = o.prices.Lookup(o.model)
	}
	for _, sp := range o.specs {
		o.specTokens += o.ctxm.MessageTokens(llm.Message{Content: sp.Name + sp.Description + string(sp.Parameters)})
	}
	o.guard = cfg.SpendGuard
	if err := o.checkCostLimits(); err != nil {
		return nil, err
	}
	if err := o.checkSkills(); err != nil { // spawn_skill.go
		return nil, err
	}
	if err := o.initDelegation(); err != nil { // delegation.go
		return nil, err
	}
	if o.pool == nil {
		// On the orchestrator's clock, so a fake Config.Clock and the
		// pool agree about what has expired.
		p, err := pool.NewMemory(pool.MemoryConfig{Clock: o.clock})
		if err != nil {
			return nil, fmt.Errorf("the default pool: %w", err)
		}
		o.pool = p
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.control = cfg.Control; o.control == nil {
		o.control, _ = NewMemoryControl(MemoryControlConfig{}) // the zero config cannot fail
	}
	if o.loc == nil {
		o.loc = time.UTC
	}
	o.persona = strings.TrimSpace(cfg.SystemPrompt)
	o.capsText = capabilities(reg) + skillsPrompt(cfg.Skills) // spawn_skill.go
	if t := loop.Budget.MaxTokens; t > 0 {
		if err := o.checkTokens(t, nil); err != nil {
			return nil, fmt.Errorf("LoopConfig.Budget: %w", err)
		}
	}
	if o.tel, err = newTelemetry(cfg); err != nil {
		return nil, fmt.Errorf("%w: the MeterProvider's instruments: %w", ErrInvalidConfig, err)
	}
	o.bg.ctx, o.bg.cancel = context.WithCancel(context.Background())
	o.bg.slots = make(chan struct{}, extractionWorkers)
	o.bg.tail = make(map[convKey]chan struct{})
	o.bg.forgot = make(map[convKey]uint64)
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
// conversation that is running. The caller gives it back with release.
func (o *Orchestrator) acquire(ctx context.Context, key convKey) (*conversation, error) {
	o.mu.Lock()
	c := o.convs[key]
	if c == nil {
		c, _ = o.convFree.Get().(*conversation)
		if c == nil {
			c = &conversation{sem: make(chan struct{}, 1)}
		}
		o.convs[key] = c
	}
	c.waiters++
	o.mu.Unlock()

	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		o.leave(key, c)
		return nil, ctx.Err()
	}
	if o.locker == nil {
		return c, nil
	}
	// Other replicas may serve this conversation too.
	unlock, err := o.locker.Lock(ctx, lockKey(key))
	if err != nil {
		<-c.sem
		o.leave(key, c)
		return nil, fmt.Errorf("agent: locking the conversation: %w", err)
	}
	c.unlock = unlock
	return c, nil
}

// release gives back the turn acquire took.
func (o *Orchestrator) release(key convKey, c *conversation) {
	if c.unlock != nil {
		c.unlock()
		c.unlock = nil
	}
	<-c.sem
	o.leave(key, c)
}

// leave ends a holder's or a waiter's interest in the conversation; the
// last one out recycles it.
func (o *Orchestrator) leave(key convKey, c *conversation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	c.waiters--
	if c.waiters == 0 {
		delete(o.convs, key)
		o.convFree.Put(c)
	}
}

// lockKey names a conversation for the Locker; the tenant's length comes
// first so no two (tenant, conversation) pairs share a key.
func lockKey(k convKey) string {
	return "conv:" + strconv.Itoa(len(k.tenant)) + ":" + k.tenant + ":" + k.conv
}

// History returns the newest MaxHistoryMessages messages of a
// conversation's history in the memory provider (with compaction on, those
// since the newest summary): what its next message starts from. "" names DefaultConversationID.
func (o *Orchestrator) History(ctx context.Context, tenantID, conversationID string) ([]llm.Message, error) {
	if err := checkConversation(tenantID, conversationID); err != nil {
		return nil, err
	}
	h, err := o.mem.History(ctx, tenantID, conversationOf(conversationID), o.historyLimit())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHistoryNotLoaded, err)
	}
	return h, nil
}

// Tools returns the specs of the tools the model sees.
func (o *Orchestrator) Tools() []llm.ToolSpec { return append([]llm.ToolSpec(nil), o.specs...) }

// Forget erases a conversation (for example when the user deletes it):
// its history, the long-term items it wrote (memory.Provider.Forget with
// its ID), its Agent-Tools waiting in the pool (for input or approval,
// also those a sub-agent called): a decision on one of them afterwards is
// approval.ErrNotFound, and nothing runs; the texts injected for its
// next message (Inject) and a pause (Pause): the next message starts
// afresh, with no note to continue a paused task; with SubAgents, the
// sub-agents' results stored for it and its background graphs
// (delegate.Engine.Forget): their tasks not started do not start, and
// their ends are not delivered, so no delivery brings the conversation
// back (but one already under way, which may then be made once after
// Forget). It waits for a running message of that conversation.
// Facts still being extracted from its turns (MemoryOptions.Extract) are
// dropped when the extraction ends, even when the conversation has new
// messages by then, also when the extraction runs on another replica
// sharing the memory provider (it finds its turn gone from the history;
// with a Config.Locker the two never interleave).
func (o *Orchestrator) Forget(ctx context.Context, tenantID, conversationID string) error {
	if err := checkConversation(tenantID, conversationID); err != nil {
		return err
	}
	conversationID = conversationOf(conversationID)
	key := convKey{tenantID, conversationID}
	c, err := o.acquire(ctx, key)
	if err != nil {
		return err
	}
	defer o.release(key, c)
	o.forgetExtractions(key) // also when the provider's Forget fails: the user asked
	// The texts injected for its next message and its pause (steer.go).
	if err := o.control.Forget(ctx, tenantID, conversationID); err != nil {
		o.log.WarnContext(ctx, "agent: dropping the conversation's injected messages and pause failed", "tenant", tenantID, "conversation", conversationID, "err", err)
	}
	// The pending agents, then the history, which goes too when the pool
	// fails: the user asked.
	perr := o.forgetPending(ctx, tenantID, conversationID)
	if o.spawn != nil && o.spawn.del.engine != nil {
		if err := o.spawn.del.engine.Forget(ctx, tenantID, conversationID); err != nil {
			perr = errors.Join(perr, fmt.Errorf("agent: forgetting the conversation's sub-agent results: %w", err))
		}
	}
	if _, err := o.mem.Forget(ctx, tenantID, memory.Provenance{ConversationID: conversationID}); err != nil {
		return errors.Join(fmt.Errorf("agent: forgetting the conversation: %w", err), perr)
	}
	return perr
}

// now reads the orchestrator's clock (Config.Clock).
func (o *Orchestrator) now() time.Time { return o.clock.Now() }
