package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/memory"
)

// ErrUnsupported is returned for what the engine cannot do with its
// configuration: HandleDue and HandleLost without a Dispatcher store.
var ErrUnsupported = errors.New("trigger: unsupported")

// Engine defaults.
const (
	// DefaultMaxConcurrent is how many runs execute at once when
	// Config.MaxConcurrent is zero. A run mostly waits on a model (a
	// digest's call takes seconds and little CPU), so the default is sized
	// for waiting, not for cores; each waiting run holds its goroutine and
	// what its executor keeps (an agent's conversation). Lower it when
	// runs burn CPU or a model's rate limit is the bound.
	DefaultMaxConcurrent = 100
	// DefaultRunTimeout bounds a run of a task without Budget.MaxWall
	// when Config.RunTimeout is zero.
	DefaultRunTimeout = 10 * time.Minute
	// MaxBackoff caps the wait between two attempts of a run.
	MaxBackoff = 24 * time.Hour
	// WallGrace is how long past its Budget.MaxWall a run may go on before
	// the engine cancels it: the executor holds to MaxWall itself (the
	// assistant ends its loop and answers from what it gathered), and
	// the grace lets that last answer arrive.
	WallGrace = time.Minute
)

const (
	conflictRetries = 5                // re-reads of a task on ErrConflict
	storeErrorDelay = 5 * time.Second  // wait after a store failure
	recordTimeout   = 30 * time.Second // for writing an outcome after ctx ended
)

// Executor carries out a run of a task. Execute is called once per
// attempt; it should honour ctx, which ends at the run's timeout and when
// the engine stops. A panic is recovered into a failed attempt.
type Executor interface {
	Execute(ctx context.Context, run ExecRun) (ExecResult, error)
}

// ExecutorFunc adapts a function to an Executor.
type ExecutorFunc func(ctx context.Context, run ExecRun) (ExecResult, error)

// Execute calls f.
func (f ExecutorFunc) Execute(ctx context.Context, run ExecRun) (ExecResult, error) {
	return f(ctx, run)
}

// ExecRun is what an executor is given for one attempt.
type ExecRun struct {
	// Task is a copy of the task; the executor may keep it.
	Task *Task
	// RunID is the run's stable id, the same across attempts of one due
	// time: use it to make side effects idempotent.
	RunID string
	// DueAt is when the run was due.
	DueAt time.Time
	// Attempt counts the attempts of this run, from 1.
	Attempt int
	// Event is the event that fired an event trigger; nil for the other
	// kinds. Its Data is untrusted.
	Event *Event
	// Previous is the output of the run of another task that chained to
	// this one with Route.PassOutput (RouteChain); empty otherwise.
	Previous *Previous
}

// Previous is what a run chained after another (RouteChain) is told of
// it.
type Previous struct {
	TaskID, RunID string
	// Output is the previous run's result when its route passes it
	// (Route.PassOutput), empty otherwise.
	Output string
	// Depth counts the runs chained before this one, from 1; a chain
	// stops at MaxChainDepth.
	Depth int
}

// MaxChainDepth is the longest chain of runs (RouteChain) one run
// starts: tasks chained in a loop stop there.
const MaxChainDepth = 10

// ExecResult is what an attempt produced.
type ExecResult struct {
	// Result is the output text, kept in the run history (clipped to
	// MaxTextLen, made valid UTF-8).
	Result string
	// Usage is what the attempt consumed; an invalid Usage is dropped.
	Usage Usage
	// Approvals are actions the run left waiting for the user's
	// confirmation: the run waits (RunWaiting) until they are settled
	// (Engine.ApprovalSettled), and a one-time task is PENDING_APPROVAL
	// meanwhile; a recurring one keeps firing.
	Approvals []Approval
	// BudgetWarning and BudgetExceeded report that the run used 80% of a
	// limit of its task's Budget, or reached one (and answered with what
	// it had); the engine tells the Observer.
	BudgetWarning, BudgetExceeded bool
	// AgentRunID identifies the attempt in the executor's own records
	// (trigger/agentexec: agent.Result.RunID), whatever its outcome; the
	// engine keeps it on the run (Run.AgentRunID, clipped to MaxTextLen).
	AgentRunID string
}

// Config configures an Engine.
type Config struct {
	// Store keeps the tasks. Nil: a new MemoryStore using Clock.
	Store Store
	// Clock gives the time and the timers. Nil: clock.System.
	Clock clock.Clock
	// Executors maps executor names to executors; a task naming an
	// executor that is not here is refused. DefaultExecutor
	// ("orchestrator") is the name of a task whose Executor is empty.
	Executors map[string]Executor
	// Logger logs what the scheduler cannot return: failed runs,
	// notifiers and stores. Nil: slog.Default(), as in every valet
	// package.
	Logger *slog.Logger
	// MaxConcurrent is how many runs execute at once. Zero:
	// DefaultMaxConcurrent (100).
	MaxConcurrent int
	// Grace is how late a run may start and still be on time (see
	// MissedPolicy). Zero: DefaultGrace.
	Grace time.Duration
	// RunTimeout bounds an attempt of a task without Budget.MaxWall.
	// Zero: DefaultRunTimeout.
	RunTimeout time.Duration
	// Bus carries the events of event triggers: Publish hands it an
	// event, Run subscribes to it. Nil: a new MemoryBus using Clock. A
	// Store and a Bus that both report a namespace (Namespaced) must
	// report the same one, or New refuses them (ErrInvalid).
	Bus EventBus
	// Conditions maps condition names to the checks condition triggers
	// poll; a task naming a condition that is not here is refused.
	Conditions map[string]Condition
	// Notifiers maps channel names (Task.Output.Channel) to the
	// notifiers that deliver on them; a task whose route notifies on a
	// channel that is not here is refused.
	Notifiers map[string]Notifier
	// Memory keeps the results of tasks routed to RouteMemory; such a
	// task is refused without it.
	Memory MemoryWriter
	// Observer hears of every task's lifecycle. Nil: nobody.
	Observer Observer
	// TracerProvider receives a span per attempt of a task's run,
	// "trigger.run {task name}", whose ctx the executor gets: with
	// agentexec, the agent's invoke_agent span of the run is its child.
	// Nil: no spans.
	TracerProvider trace.TracerProvider
}

// MemoryWriter is the part of memory.Provider the engine uses for
// RouteMemory.
type MemoryWriter interface {
	Remember(ctx context.Context, tenantID string, items ...memory.Item) ([]string, error)
}

// Condition is the check of a condition trigger: whether the condition
// holds now for the task (a copy). It should be quick and honour ctx,
// which ends at the engine's RunTimeout; an error, or a panic, leaves
// the task's state as it was until the next poll.
type Condition func(ctx context.Context, task *Task) (bool, error)

// Engine runs the tasks of a Store: Run is the scheduler, the other
// methods manage tasks of one tenant. It is safe for concurrent use.
type Engine struct {
	store      Store
	clock      clock.Clock
	executors  map[string]Executor
	log        *slog.Logger
	grace      time.Duration
	runTimeout time.Duration

	bus        EventBus
	conditions map[string]Condition
	notifiers  map[string]Notifier
	memory     MemoryWriter
	observers  *observerQueue // nil without an Observer
	tracer     trace.Tracer   // nil without a TracerProvider

	sem     chan struct{} // a slot per executing run
	wake    chan struct{} // buffered: something changed, look again
	started atomic.Bool

	mu      sync.Mutex
	running map[taskKey]bool      // tasks with a run under way
	waiting map[waitKey]time.Time // waiting runs, by their approvals' first expiry

	settleMu sync.Mutex // one ApprovalSettled at a time
	// Memory one-off runs: those fired (seenSet, seenRing: oldest
	// first), those a stop interrupted, and the WaitGroup of Run.
	seenSet     map[string]struct{}
	seenRing    []string
	interrupted []oneOff
	runWG       atomic.Pointer[sync.WaitGroup]
	runCtx      atomic.Pointer[context.Context]
	// Approvals settled before their run was recorded waiting.
	early     map[string]Settled
	earlyRing []string
	watched   chan struct{} // buffered: a run went waiting
	// For Idle: the one-off goroutines at work, the wake-ups of those
	// asleep (by id), and the wake-up of the approvals' sweep.
	work    int
	wakes   map[uint64]time.Time
	wakeSeq uint64
	sweepAt time.Time
}

type taskKey struct{ tenant, id string }

// New returns an Engine for cfg, or ErrInvalid when cfg is wrong.
func New(cfg Config) (*Engine, error) {
	if cfg.MaxConcurrent < 0 {
		return nil, fmt.Errorf("%w: engine: negative MaxConcurrent %d", ErrInvalid, cfg.MaxConcurrent)
	}
	if cfg.Grace < 0 || cfg.RunTimeout < 0 {
		return nil, fmt.Errorf("%w: engine: negative Grace or RunTimeout", ErrInvalid)
	}
	if err := checkNamespaces(cfg.Store, cfg.Bus); err != nil {
		return nil, err
	}
	e := &Engine{
		store:      cfg.Store,
		clock:      cfg.Clock,
		executors:  make(map[string]Executor, len(cfg.Executors)),
		log:        cfg.Logger,
		grace:      cfg.Grace,
		runTimeout: cfg.RunTimeout,
		wake:       make(chan struct{}, 1),
		running:    make(map[taskKey]bool),
		waiting:    make(map[waitKey]time.Time),
		watched:    make(chan struct{}, 1),
		seenSet:    make(map[string]struct{}),
		early:      make(map[string]Settled),
	}
	if cfg.TracerProvider != nil {
		e.tracer = cfg.TracerProvider.Tracer(instrumentationName)
	}
	e.notifiers = make(map[string]Notifier, len(cfg.Notifiers))
	for name, n := range cfg.Notifiers {
		if err := checkID("notifier channel", name); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if n == nil {
			return nil, fmt.Errorf("%w: engine: notifier %q is nil", ErrInvalid, name)
		}
		e.notifiers[name] = n
	}
	e.memory = cfg.Memory
	e.conditions = make(map[string]Condition, len(cfg.Conditions))
	for name, c := range cfg.Conditions {
		if err := checkID("condition name", name); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if c == nil {
			return nil, fmt.Errorf("%w: engine: condition %q is nil", ErrInvalid, name)
		}
		e.conditions[name] = c
	}
	for name, ex := range cfg.Executors {
		if err := checkID("executor name", name); err != nil {
			return nil, fmt.Errorf("engine: %w", err)
		}
		if ex == nil {
			return nil, fmt.Errorf("%w: engine: executor %q is nil", ErrInvalid, name)
		}
		e.executors[name] = ex
	}
	if e.clock == nil {
		e.clock = clock.System{}
	}
	if e.store == nil {
		e.store = &MemoryStore{Clock: e.clock}
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.bus = cfg.Bus
	if e.bus == nil {
		e.bus = &MemoryBus{Clock: e.clock, Logger: e.log}
	}
	if cfg.Observer != nil {
		e.observers = newObserverQueue(cfg.Observer, e.log)
	}
	if e.grace == 0 {
		e.grace = DefaultGrace
	}
	if e.runTimeout == 0 {
		e.runTimeout = DefaultRunTimeout
	}
	n := cfg.MaxConcurrent
	if n == 0 {
		n = DefaultMaxConcurrent
	}
	e.sem = make(chan struct{}, n)
	return e, nil
}

// Store returns the engine's store.
func (e *Engine) Store() Store { return e.store }

func (e *Engine) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) claim(k taskKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running[k] {
		return false
	}
	e.running[k] = true
	return true
}

func (e *Engine) release(k taskKey) {
	e.mu.Lock()
	delete(e.running, k)
	e.mu.Unlock()
}

func (e *Engine) isRunning(k taskKey) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[k]
}

func (e *Engine) tryAcquire() bool {
	select {
	case e.sem <- struct{}{}:
		return true
	default:
		return false
	}
}

func (e *Engine) busy() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.running)
}

// Run is the scheduler: it runs the due tasks of every tenant, waking at
// the earliest NextRun and whenever a task is created, resumed or retried
// or a run finishes, and it subscribes to the bus for the runs of event
// tasks. With a Dispatcher store it hands the runs to the Dispatcher
// instead of polling the store. It returns nil when ctx ends, after the
// runs under way, whose contexts are cancelled, have returned (an error
// when the Dispatcher cannot start). One Run at a time: a second
// concurrent call returns an error.
//
// Before it starts, a Store that implements InstanceIdentifier claims its
// namespace on a Bus that implements NamespaceClaimer: when other data
// owns the bus (ErrInvalid), or the claim cannot be made, Run returns the
// error and runs nothing.
func (e *Engine) Run(ctx context.Context) error {
	if !e.started.CompareAndSwap(false, true) {
		return errors.New("trigger: Engine.Run is already running")
	}
	defer e.started.Store(false)
	if err := e.claimNamespace(ctx); err != nil { // before anything runs: see NamespaceClaimer
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			return nil
		}
		return err
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	sctx, stopEvents := context.WithCancel(ctx)
	defer stopEvents() // before wg.Wait, so that the subscription ends
	wg.Go(func() { e.subscribe(sctx, &wg) })
	wg.Go(func() { e.sweep(sctx) })
	if d, ok := e.store.(Dispatcher); ok {
		return d.Dispatch(ctx, e)
	}
	e.runWG.Store(&wg)
	defer e.runWG.Store(nil)
	e.runCtx.Store(&ctx)
	defer e.runCtx.Store(nil)
	e.resumeInterrupted(ctx, &wg)
	for {
		if ctx.Err() != nil {
			return nil
		}
		wait, until, err := e.dispatch(ctx, &wg)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			e.log.Error("trigger: scheduler", "err", err)
			wait, until = storeErrorDelay, e.clock.Now().Add(storeErrorDelay)
		}
		var timer Timer
		var fired <-chan time.Time
		if wait >= 0 {
			timer = e.clock.NewTimer(wait)
			fired = timer.C()
			if !e.clock.Now().Before(until) {
				timer.Stop()
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-e.wake:
		case <-fired:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// dispatch starts the due tasks it has slots for and returns how long to
// wait for the next NextRun, or -1 to wait for a signal only.
func (e *Engine) dispatch(ctx context.Context, wg *sync.WaitGroup) (time.Duration, time.Time, error) {
	now := e.clock.Now()
	if free := cap(e.sem) - len(e.sem); free > 0 {
		due, err := e.store.Due(ctx, now, e.busy()+free)
		if err != nil {
			return 0, time.Time{}, err
		}
		for _, t := range due {
			k := taskKey{t.TenantID, t.ID}
			if !e.claim(k) {
				continue
			}
			if !e.tryAcquire() {
				e.release(k)
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer e.notify()
				defer e.release(k)
				defer e.releaseSlot()
				e.fire(ctx, t)
			}()
		}
	}
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	upcoming, err := e.store.Due(ctx, far, e.busy()+1)
	if err != nil {
		return 0, time.Time{}, err
	}
	for _, t := range upcoming {
		if e.isRunning(taskKey{t.TenantID, t.ID}) {
			continue
		}
		if d := t.NextRun.Sub(e.clock.Now()); d > 0 {
			return d, t.NextRun, nil
		}
		if cap(e.sem) > len(e.sem) {
			// Due already: the clock moved on since this dispatch read
			// it. Look again at once.
			return 0, t.NextRun, nil
		}
		return -1, time.Time{}, nil // due but no slot: a finishing run signals
	}
	return -1, time.Time{}, nil
}
