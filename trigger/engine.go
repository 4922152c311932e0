package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/valetkit/valet/memory"
)

// ErrUnsupported is returned for what the engine cannot do with its
// configuration: HandleDue and HandleLost without a Dispatcher store.
var ErrUnsupported = errors.New("trigger: unsupported")

// Engine defaults.
const (
	// DefaultMaxConcurrent is how many runs execute at once when
	// Config.MaxConcurrent is zero.
	DefaultMaxConcurrent = 4
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
}

// Config configures an Engine.
type Config struct {
	// Store keeps the tasks. Nil: a new MemoryStore using Clock.
	Store Store
	// Clock gives the time and the timers. Nil: SystemClock.
	Clock Clock
	// Executors maps executor names to executors; a task naming an
	// executor that is not here is refused. DefaultExecutor
	// ("orchestrator") is the name of a task whose Executor is empty.
	Executors map[string]Executor
	// Logger logs what the scheduler cannot return: failed runs,
	// notifiers and stores. Nil: slog.Default(), as in every valet
	// package.
	Logger *slog.Logger
	// MaxConcurrent is how many runs execute at once. Zero:
	// DefaultMaxConcurrent.
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
	clock      Clock
	executors  map[string]Executor
	log        *slog.Logger
	grace      time.Duration
	runTimeout time.Duration

	bus        EventBus
	conditions map[string]Condition
	notifiers  map[string]Notifier
	memory     MemoryWriter
	observers  *observerQueue // nil without an Observer

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
		e.clock = SystemClock{}
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

// CreateTask validates t and stores it for its tenant (t.TenantID). An
// executor that is not registered is ErrInvalid, and so is a condition
// that is not. An empty Status is ACTIVE; COMPLETED, EXPIRED and DEAD are
// refused. CreateTask sets t.NextRun: for a schedule, its first time from
// now (ErrInvalid when there is none: a one-time task in the past is
// refused); for a condition, now (its first poll; a condition that holds
// already then fires once); for events, none. It clears t.LastRun and
// t.ConditionMet and sets what Store.Create sets. When the task's executor
// is a TaskChecker, it is asked about the task before it is stored; its
// refusal is ErrInvalid.
func (e *Engine) CreateTask(ctx context.Context, t *Task) error {
	if t == nil {
		return fmt.Errorf("%w: nil task", ErrInvalid)
	}
	if _, ok := e.executors[t.ExecutorName()]; !ok {
		return fmt.Errorf("%w: task %q: no executor %q", ErrInvalid, t.ID, t.ExecutorName())
	}
	if t.Trigger.Kind == KindCondition && e.conditions[t.Trigger.Condition] == nil {
		return fmt.Errorf("%w: task %q: no condition %q", ErrInvalid, t.ID, t.Trigger.Condition)
	}
	if err := e.checkRoute(t); err != nil {
		return err
	}
	switch t.Status {
	case "":
		t.Status = StatusActive
	case StatusCompleted, StatusExpired, StatusDead:
		return fmt.Errorf("%w: task %q: created %s", ErrInvalid, t.ID, t.Status)
	}
	if err := t.Check(); err != nil {
		return err
	}
	if err := e.checkTask(ctx, t); err != nil {
		return err
	}
	now := e.clock.Now()
	switch t.Trigger.Kind {
	case KindSchedule:
		next, ok := t.Trigger.Schedule.Next(now.Add(-time.Nanosecond))
		if !ok {
			return fmt.Errorf("%w: task %q: %v has no time from now on", ErrInvalid, t.ID, t.Trigger.Schedule)
		}
		t.NextRun = next
	case KindCondition:
		t.NextRun = now
	default:
		t.NextRun = time.Time{}
	}
	t.LastRun, t.ConditionMet = time.Time{}, false
	if err := e.store.Create(ctx, t); err != nil {
		return err
	}
	e.notify()
	e.scheduled(t)
	return nil
}

// Get returns the tenant's task, or ErrNotFound.
func (e *Engine) Get(ctx context.Context, tenantID, id string) (*Task, error) {
	if err := checkTask(tenantID, id); err != nil {
		return nil, err
	}
	return e.store.Get(ctx, tenantID, id)
}

// List returns the tenant's tasks with one of statuses, all when none is
// given.
func (e *Engine) List(ctx context.Context, tenantID string, statuses ...Status) ([]*Task, error) {
	if err := checkID("tenant ID", tenantID); err != nil {
		return nil, err
	}
	return e.store.List(ctx, tenantID, statuses...)
}

// Delete removes the tenant's task and its history. A run under way
// finishes, but its outcome is not recorded.
func (e *Engine) Delete(ctx context.Context, tenantID, id string) error {
	if err := checkTask(tenantID, id); err != nil {
		return err
	}
	return e.store.Delete(ctx, tenantID, id)
}

// Runs returns the task's newest runs, newest first, at most limit (all
// kept when 0).
func (e *Engine) Runs(ctx context.Context, tenantID, id string, limit int) ([]Run, error) {
	if err := checkTask(tenantID, id); err != nil {
		return nil, err
	}
	return e.store.Runs(ctx, tenantID, id, limit)
}

// Pause stops an ACTIVE task from running; pausing a PAUSED task does
// nothing. Other statuses are ErrInvalid. A run under way finishes.
func (e *Engine) Pause(ctx context.Context, tenantID, id string) (*Task, error) {
	return e.mutate(ctx, tenantID, id, func(t *Task) error {
		switch t.Status {
		case StatusActive, StatusPaused:
			t.Status = StatusPaused
			return nil
		}
		return fmt.Errorf("%w: task %q is %s, not ACTIVE", ErrInvalid, id, t.Status)
	})
}

// Resume makes a PAUSED task ACTIVE again; resuming an ACTIVE task does
// nothing. Other statuses are ErrInvalid. NextRun is recomputed from the
// first time not yet handled, by the task's MissedPolicy: CatchUpOnce
// runs once, at once, when times passed while it was paused; Skip runs
// none of them. A one-time task whose time was skipped becomes EXPIRED.
// A run waiting for its next attempt when the task was paused gets it at
// the task's next firing, with the same run id.
func (e *Engine) Resume(ctx context.Context, tenantID, id string) (*Task, error) {
	t, err := e.mutate(ctx, tenantID, id, func(t *Task) error {
		switch t.Status {
		case StatusActive:
			return nil
		case StatusPaused:
		default:
			return fmt.Errorf("%w: task %q is %s, not PAUSED", ErrInvalid, id, t.Status)
		}
		last := t.LastRun
		if !t.NextRun.IsZero() {
			last = t.NextRun.Add(-time.Nanosecond)
		} else if last.IsZero() {
			last = t.CreatedAt
		}
		t.Status = StatusActive
		t.NextRun = e.nextRun(t, last, e.clock.Now())
		if t.NextRun.IsZero() && t.Trigger.Kind == KindSchedule {
			t.Status = StatusExpired
			if !t.Trigger.Schedule.At.IsZero() && !t.LastRun.Before(t.Trigger.Schedule.At) {
				t.Status = StatusCompleted // it ran while it was being paused
			}
		}
		return nil
	})
	if err == nil {
		e.notify()
		e.scheduled(t)
	}
	return t, err
}

// Retry makes a DEAD task ACTIVE again, with NextRun recomputed from its
// last run by its MissedPolicy; a task with no schedule time left (a
// one-time task) runs at once. Other statuses are ErrInvalid.
func (e *Engine) Retry(ctx context.Context, tenantID, id string) (*Task, error) {
	t, err := e.mutate(ctx, tenantID, id, func(t *Task) error {
		if t.Status != StatusDead {
			return fmt.Errorf("%w: task %q is %s, not DEAD", ErrInvalid, id, t.Status)
		}
		now := e.clock.Now()
		last := t.LastRun
		if r, ok := e.lastScheduled(ctx, t); ok && r.StartedAt.After(last) {
			last = r.StartedAt
		}
		if last.IsZero() {
			last = t.CreatedAt
		}
		t.Status = StatusActive
		t.NextRun = e.nextRun(t, last, now)
		if t.NextRun.IsZero() && t.Trigger.Kind == KindSchedule {
			t.NextRun = now
		}
		return nil
	})
	if err == nil {
		e.notify()
		e.scheduled(t)
	}
	return t, err
}

// RunNow runs the tenant's task once, now, outside its schedule and
// whatever its status, in the caller's goroutine: one attempt, no retry,
// within the MaxConcurrent bound. It records the run in the history (a
// failure as RunDead, as no attempt follows; a refusal, ErrRefused, as
// RunRefused, told to the task's channel), sets LastRun, and leaves
// NextRun and Status alone. It returns the finished run; an execution
// failure is in the run, not the error. A task with a run under way is
// ErrConflict.
func (e *Engine) RunNow(ctx context.Context, tenantID, id string) (Run, error) {
	if err := checkTask(tenantID, id); err != nil {
		return Run{}, err
	}
	t, err := e.store.Get(ctx, tenantID, id)
	if err != nil {
		return Run{}, err
	}
	if _, ok := e.executors[t.ExecutorName()]; !ok {
		return Run{}, fmt.Errorf("%w: task %q: no executor %q", ErrInvalid, id, t.ExecutorName())
	}
	k := taskKey{tenantID, id}
	if !e.claim(k) {
		return Run{}, fmt.Errorf("%w: task %q has a run under way", ErrConflict, id)
	}
	defer e.notify()
	defer e.release(k)
	if err := e.acquire(ctx); err != nil {
		return Run{}, err
	}
	defer e.releaseSlot()

	now := e.clock.Now()
	r := Run{
		ID: fitID(RunID(id, now) + "#now"), TaskID: id, TenantID: tenantID,
		DueAt: now, StartedAt: now, Status: RunRunning, Attempt: 1,
	}
	if err := e.store.AddRun(ctx, r); err != nil {
		return Run{}, err
	}
	r, res, xerr := e.attempt(ctx, t, r, nil, nil)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if refused(xerr) {
		r, xerr = refuse(r, res), nil // told along the route as any outcome
	} else if xerr != nil {
		r.Status = RunDead
	}
	if err := e.store.UpdateRun(wctx, r); err != nil {
		return r, err
	}
	_, err = e.mutate(wctx, tenantID, id, func(t *Task) error {
		t.LastRun = r.StartedAt
		return nil
	})
	if err != nil {
		return r, err
	}
	if xerr == nil {
		e.ended(ctx, t, r, res, nil) // the result goes along the task's route; a waiting run is watched
	} else {
		e.budgetSteps(t, r, res)
		e.observe(LifecycleFailed, t, r) // the task is not DEAD: nothing to notify
	}
	return r, nil
}

// mutate reads the task, applies f and writes it back, reading again on
// ErrConflict a few times.
func (e *Engine) mutate(ctx context.Context, tenantID, id string, f func(*Task) error) (*Task, error) {
	if err := checkTask(tenantID, id); err != nil {
		return nil, err
	}
	for i := 0; ; i++ {
		t, err := e.store.Get(ctx, tenantID, id)
		if err != nil {
			return nil, err
		}
		if err := f(t); err != nil {
			return nil, err
		}
		err = e.store.Update(ctx, t)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, ErrConflict) || i >= conflictRetries {
			return nil, err
		}
	}
}

// nextRun is the time a task that handled its schedule up to last should
// next run, at now, by its MissedPolicy: zero when there is none.
func (e *Engine) nextRun(t *Task, last, now time.Time) time.Time {
	switch t.Trigger.Kind {
	case KindEvent:
		return time.Time{}
	case KindCondition:
		if next := last.Add(t.Trigger.Every); next.After(now) {
			return next
		}
		return now
	}
	runAt, ok, next := t.Trigger.Schedule.Due(last, now, t.Trigger.Missed, e.grace)
	if ok {
		return runAt
	}
	return next
}

// lastScheduled returns the newest run of t's schedule (not of RunNow)
// among its recent history.
func (e *Engine) lastScheduled(ctx context.Context, t *Task) (Run, bool) {
	return e.recentRun(ctx, t, func(r Run) bool { return r.ID == RunID(t.ID, r.DueAt) })
}

// ErrStale is what [Engine.HandleDue] returns for a run that is no longer
// wanted: its task was deleted, is not ACTIVE, or is due at another time.
// A Dispatcher drops such a run without trying it again.
var ErrStale = errors.New("trigger: stale run")

// Dispatcher is a Store that delivers due runs itself, durably, in place
// of the engine's polling of Due: trigger/rivertrigger is one. When
// Config.Store is a Dispatcher, [Engine.Run] calls Dispatch with the
// engine as the DueHandler. A Dispatcher's Create and Update queue the
// run of a task that is ACTIVE with a NextRun, due at NextRun, once per
// task and due time however often they are called, on however many
// replicas.
type Dispatcher interface {
	Store
	// Dispatch delivers due runs to h, each attempt once, until ctx ends;
	// it returns nil after the attempts under way, whose contexts are
	// cancelled, have returned. An attempt h fails (an error other than
	// ErrStale) is tried again, by the Dispatcher's own schedule of
	// retries, until Due.MaxAttempts; a run it loses without h having
	// finished the last attempt (a worker that died on it) it reports to
	// h.HandleLost.
	Dispatch(ctx context.Context, h DueHandler) error
	// Enqueue queues a one-off run to run now: of an event task
	// (d.Event set), once per (task, event id), or chained after another
	// run (d.Previous set), once per (task, previous run), however often
	// it is called.
	Enqueue(ctx context.Context, d Due) error
	// Finish records r, the end of an attempt, and updates t (as
	// Store.Update, ErrConflict when t.Revision is not the stored one)
	// in one transaction: both or neither.
	Finish(ctx context.Context, r Run, t *Task) error
}

// DueHandler handles the runs a Dispatcher delivers. The Engine is one.
type DueHandler interface {
	// HandleDue carries out one attempt of d. It returns nil when the
	// run succeeded or was refused (RunRefused: not to be tried again),
	// ErrStale when the run is no longer wanted, and the
	// attempt's error otherwise; after the last attempt
	// (d.Attempt >= d.MaxAttempts) the task is DEAD by then.
	HandleDue(ctx context.Context, d Due) error
	// HandleLost records that the dispatcher gave d up without an attempt
	// finishing it: the task becomes DEAD, the run dead with reason. It
	// does nothing when the task has moved on, so it may be called more
	// than once.
	HandleLost(ctx context.Context, d Due, reason string) error
}

// Due is one attempt of a run a Dispatcher delivers.
type Due struct {
	TenantID, TaskID string
	// DueAt is the run's due time: the task's NextRun when it was queued.
	DueAt time.Time
	// Attempt counts this run's attempts, from 1; MaxAttempts is the
	// last one the dispatcher makes.
	Attempt, MaxAttempts int
	// Event is the event that fired an event task, nil for a schedule
	// or a condition. Its run's id is EventRunID, and DueAt is when it
	// was queued.
	Event *Event
	// Previous is set for a run another task's run chained to
	// (RouteChain); its id is ChainRunID, and DueAt is when it was
	// queued.
	Previous *Previous
}

// HandleDue carries out one attempt of a run a Dispatcher delivers: it
// runs the task, when it is still ACTIVE and due at d.DueAt, through its
// executor, records the attempt in the run history under the run's stable
// id, and moves the task on to its next time (in one Finish with the
// run's record). The last failed attempt makes the run dead and the task
// DEAD; a refused one (ErrRefused) is recorded as RunRefused, moves the
// task on and returns nil. An attempt cut short because ctx ended is recorded as failed
// ("interrupted") and leaves the task as it was.
func (e *Engine) HandleDue(ctx context.Context, d Due) error {
	disp, ok := e.store.(Dispatcher)
	if !ok {
		return fmt.Errorf("%w: HandleDue needs a Dispatcher store", ErrUnsupported)
	}
	if d.Event != nil || d.Previous != nil {
		return e.handleOneOff(ctx, disp, d)
	}
	t, err := e.store.Get(ctx, d.TenantID, d.TaskID)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: task %q is gone", ErrStale, d.TaskID)
	}
	if err != nil {
		return err
	}
	if t.Status != StatusActive || !t.NextRun.Equal(d.DueAt) {
		return fmt.Errorf("%w: task %q is %s, next due %s, not %s", ErrStale, t.ID, t.Status,
			t.NextRun.Format(time.RFC3339Nano), d.DueAt.Format(time.RFC3339Nano))
	}
	k := taskKey{t.TenantID, t.ID}
	if !e.claim(k) {
		return fmt.Errorf("%w: task %q has a run under way", ErrConflict, t.ID)
	}
	defer e.notify()
	defer e.release(k)
	if err := e.acquire(ctx); err != nil {
		return err
	}
	defer e.releaseSlot()

	r := e.dueRun(t, RunID(t.ID, d.DueAt), d)
	if _, retry := e.findRun(ctx, t, r.ID); t.Trigger.Kind == KindCondition && !retry {
		// A poll; a run follows on a false→true edge, and its later
		// attempts do not poll again.
		if edge, err := e.pollEdge(ctx, t, d.DueAt); !edge {
			return err
		}
	}
	moved, err := e.runDue(ctx, disp, t, r, d, func(t *Task) {
		t.LastRun = r.StartedAt
		t.NextRun = e.nextRun(t, r.StartedAt, e.clock.Now())
		t.ConditionMet = t.ConditionMet || t.Trigger.Kind == KindCondition
	})
	if moved != nil {
		e.scheduled(moved)
	}
	return err
}

// dueRun is the run of t with id that d delivers, starting now.
func (e *Engine) dueRun(t *Task, id string, d Due) Run {
	return Run{
		ID: id, TaskID: t.ID, TenantID: t.TenantID, DueAt: d.DueAt,
		Status: RunRunning, StartedAt: e.clock.Now(), Attempt: max(d.Attempt, 1),
	}
}

// runDue carries out one attempt of run r of t that a Dispatcher
// delivered (d), holding a slot, and records its outcome. An attempt cut
// short because ctx was cancelled (the engine stopping) is recorded as
// interrupted; a failure with attempts left is recorded and returned for
// the dispatcher to try again; the last failure makes the task DEAD;
// otherwise (a refusal too, which is not returned) moveOn updates the
// task (a one-time task with no time left is COMPLETED, PENDING_APPROVAL
// while its run waits, EXPIRED when it was refused), in one Finish with
// the run's record. It returns the task as it was finished, nil when it
// was not, and the attempt's error.
func (e *Engine) runDue(ctx context.Context, disp Dispatcher, t *Task, r Run, d Due, moveOn func(*Task)) (*Task, error) {
	err := e.store.AddRun(ctx, r)
	if errors.Is(err, ErrConflict) {
		err = e.store.UpdateRun(ctx, r) // a later attempt
	}
	if err != nil {
		return nil, err
	}
	r, res, xerr := e.attempt(ctx, t, r, d.Event, d.Previous)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	switch {
	case xerr != nil && errors.Is(ctx.Err(), context.Canceled):
		// Stopping (a dispatcher's deadline on the attempt is a failure).
		r.Error = clip("interrupted: " + r.Error)
		return nil, errors.Join(xerr, e.store.UpdateRun(wctx, r))
	case refused(xerr):
		r, xerr = refuse(r, res), nil // an outcome: the dispatcher does not try it again
	case xerr != nil && r.Attempt < d.MaxAttempts:
		err := e.store.UpdateRun(wctx, r)
		e.ended(ctx, t, r, res, d.Previous)
		return nil, errors.Join(xerr, err)
	case xerr != nil:
		r.Status = RunDead
	}
	done, err := e.finishTask(wctx, disp, t, r, func(t *Task) {
		if r.Status == RunDead {
			t.Status, t.NextRun = StatusDead, time.Time{}
			return
		}
		moveOn(t)
		if t.NextRun.IsZero() && t.Status == StatusActive && t.Trigger.Kind == KindSchedule {
			t.Status = endStatus(r)
		}
	})
	if err != nil {
		return nil, errors.Join(xerr, err)
	}
	if done != nil {
		t = done
	} // else rescheduled meanwhile: the run, recorded alone, still goes along t's route
	e.ended(ctx, t, r, res, d.Previous)
	return done, xerr
}

// acquire takes one of the MaxConcurrent slots, or fails when ctx ends
// first; releaseSlot gives it back.
func (e *Engine) acquire(ctx context.Context) error {
	select {
	case e.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *Engine) releaseSlot() { <-e.sem }

// pollEdge polls the condition of t, due at dueAt, and reports a
// false→true edge, which the caller runs. Otherwise it records what the
// check said and moves NextRun on by the trigger's interval. A check that
// fails or panics is logged and changes nothing but NextRun.
func (e *Engine) pollEdge(ctx context.Context, t *Task, dueAt time.Time) (bool, error) {
	met, err := e.check(ctx, t)
	if err != nil {
		e.log.Warn("trigger: condition check", "tenant", t.TenantID, "task", t.ID,
			"condition", t.Trigger.Condition, "err", err)
		met = t.ConditionMet
	}
	if met && !t.ConditionMet {
		return true, nil
	}
	now := e.clock.Now()
	_, err = e.mutate(ctx, t.TenantID, t.ID, func(t *Task) error {
		if t.Status != StatusActive || !t.NextRun.Equal(dueAt) {
			return nil // changed meanwhile; a no-op update is harmless
		}
		t.ConditionMet = met
		t.NextRun = e.nextRun(t, dueAt, now)
		return nil
	})
	return false, err
}

// check calls the condition of t with the run timeout, recovering a
// panic.
func (e *Engine) check(ctx context.Context, t *Task) (met bool, err error) {
	c := e.conditions[t.Trigger.Condition]
	if c == nil {
		return false, fmt.Errorf("%w: no condition %q", ErrInvalid, t.Trigger.Condition)
	}
	ctx, cancel := context.WithTimeout(ctx, e.runTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			met, err = false, fmt.Errorf("trigger: condition %q panicked: %v", t.Trigger.Condition, p)
		}
	}()
	return c(ctx, t.Clone())
}

// findRun returns the run id among t's recent runs.
func (e *Engine) findRun(ctx context.Context, t *Task, id string) (Run, bool) {
	return e.recentRun(ctx, t, func(r Run) bool { return r.ID == id })
}

// recentRun returns the newest of t's recent runs that match accepts.
func (e *Engine) recentRun(ctx context.Context, t *Task, match func(Run) bool) (Run, bool) {
	runs, err := e.store.Runs(ctx, t.TenantID, t.ID, 20)
	if err != nil {
		return Run{}, false
	}
	for _, r := range runs {
		if match(r) {
			return r, true
		}
	}
	return Run{}, false
}

// HandleLost makes the task of a run the dispatcher gave up DEAD, with the
// run dead and its error reason, if the task is still ACTIVE and due at
// d.DueAt.
func (e *Engine) HandleLost(ctx context.Context, d Due, reason string) error {
	disp, ok := e.store.(Dispatcher)
	if !ok {
		return fmt.Errorf("%w: HandleLost needs a Dispatcher store", ErrUnsupported)
	}
	t, err := e.store.Get(ctx, d.TenantID, d.TaskID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	id := RunID(t.ID, d.DueAt)
	due := t.NextRun.Equal(d.DueAt)
	switch {
	case d.Event != nil:
		id, due = EventRunID(t.ID, d.Event.ID), t.Trigger.Kind == KindEvent
	case d.Previous != nil:
		id, due = ChainRunID(t.ID, d.Previous.RunID), true
	}
	if t.Status != StatusActive || !due || e.isRunning(taskKey{t.TenantID, t.ID}) {
		return nil
	}
	old, found := e.findRun(ctx, t, id)
	if found && old.Status != RunRunning && old.Status != RunFailed {
		return nil // it ended after all
	}
	now := e.clock.Now()
	r := Run{
		ID: id, TaskID: t.ID, TenantID: t.TenantID, DueAt: d.DueAt,
		Status: RunRunning, StartedAt: now, Attempt: max(d.Attempt, 1),
	}
	if found {
		r = old
	} else if err := e.store.AddRun(ctx, r); err != nil && !errors.Is(err, ErrConflict) {
		return err
	}
	r.Status, r.Error = RunDead, clip(reason)
	if r.Error == "" {
		r.Error = "lost"
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = now
	}
	r.FinishedAt = now
	if now.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt
	}
	_, err = e.finishTask(ctx, disp, t, r, func(t *Task) {
		t.Status, t.NextRun = StatusDead, time.Time{}
	})
	return err
}

// finishTask records r and applies f to t in one Finish, reading t again
// on ErrConflict while it is still due at r.DueAt.
func (e *Engine) finishTask(ctx context.Context, disp Dispatcher, t *Task, r Run, f func(*Task)) (*Task, error) {
	for i := 0; ; i++ {
		f(t)
		err := disp.Finish(ctx, r, t)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, ErrConflict) || i >= conflictRetries {
			return nil, err
		}
		if t, err = e.store.Get(ctx, r.TenantID, r.TaskID); err != nil {
			return nil, err
		}
		if t.Trigger.Kind != KindEvent && !t.NextRun.Equal(r.DueAt) {
			// Rescheduled meanwhile: keep the change, record the run
			// alone. A task paused meanwhile still moves on past the
			// due time that ran, so that Resume does not run it again.
			return nil, e.store.UpdateRun(ctx, r)
		}
	}
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

// fire handles one due task: a pending retry, a run of its schedule, or a
// skipped time.
func (e *Engine) fire(ctx context.Context, due *Task) {
	log := e.log.With("tenant", due.TenantID, "task", due.ID)
	if err := e.fireOnce(ctx, due); err != nil && ctx.Err() == nil {
		log.Error("trigger: run", "err", err)
		if !errors.Is(err, ErrNotFound) { // throttle a failing store
			tm := e.clock.NewTimer(storeErrorDelay)
			select {
			case <-tm.C():
			case <-ctx.Done():
			}
			tm.Stop()
		}
	}
}

func (e *Engine) fireOnce(ctx context.Context, due *Task) error {
	t, err := e.store.Get(ctx, due.TenantID, due.ID)
	if err != nil {
		return err
	}
	now := e.clock.Now()
	if t.Status != StatusActive || t.NextRun.IsZero() || t.NextRun.After(now) {
		return nil // changed since Due
	}
	var r Run
	retry := false
	if prev, ok := e.lastScheduled(ctx, t); ok && (prev.Status == RunFailed || prev.Status == RunRunning) {
		r, retry = prev, true
		r.Attempt++
	} else {
		dueAt := t.NextRun
		if t.Trigger.Kind == KindCondition {
			if edge, err := e.pollEdge(ctx, t, dueAt); !edge {
				return err
			}
		} else if now.Sub(dueAt) >= e.grace && t.Trigger.Missed == Skip {
			runAt, ok, next := t.Trigger.Schedule.Due(dueAt.Add(-time.Nanosecond), now, Skip, e.grace)
			if !ok {
				_, err := e.mutate(ctx, t.TenantID, t.ID, func(t *Task) error {
					t.NextRun = next
					if next.IsZero() && t.Status == StatusActive {
						t.Status = StatusExpired
					}
					return nil
				})
				return err
			}
			dueAt = runAt
		}
		r = Run{ID: RunID(t.ID, dueAt), TaskID: t.ID, TenantID: t.TenantID, DueAt: dueAt, Attempt: 1}
	}
	r.Status, r.StartedAt, r.FinishedAt = RunRunning, now, time.Time{}
	r.Error, r.Result, r.Consumed = "", "", Usage{}
	if retry {
		err = e.store.UpdateRun(ctx, r)
	} else if err = e.store.AddRun(ctx, r); errors.Is(err, ErrConflict) {
		err = e.store.UpdateRun(ctx, r) // the same due time again, after Retry
	}
	if err != nil {
		return err
	}
	r, res, xerr := e.attempt(ctx, t, r, nil, nil)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if xerr != nil && ctx.Err() != nil {
		// The engine is stopping: keep the task due, so that the next
		// start retries this run.
		r.Error = clip("interrupted: " + r.Error)
		return e.store.UpdateRun(wctx, r)
	}
	if refused(xerr) {
		r = refuse(r, res)
	} else if xerr != nil && r.Attempt >= t.Retry.Attempts() {
		r.Status = RunDead
	}
	if err := e.store.UpdateRun(wctx, r); err != nil {
		return err
	}
	_, err = e.mutate(wctx, t.TenantID, t.ID, func(t *Task) error {
		switch {
		case xerr == nil || r.Status == RunRefused:
			t.LastRun = r.StartedAt
			t.NextRun = e.nextRun(t, r.StartedAt, r.FinishedAt)
			t.ConditionMet = t.ConditionMet || t.Trigger.Kind == KindCondition
			if t.NextRun.IsZero() && t.Status == StatusActive {
				t.Status = endStatus(r)
			}
		case r.Status == RunDead:
			t.Status, t.NextRun = StatusDead, time.Time{}
		default:
			t.NextRun = r.FinishedAt.Add(backoff(t.Retry.Backoff, r.Attempt))
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.ended(ctx, t, r, res, nil)
	if next, gerr := e.store.Get(wctx, t.TenantID, t.ID); gerr == nil && (r.Status == RunSucceeded || r.Status == RunRefused) {
		e.scheduled(next)
	}
	return nil
}

// backoff is the wait after a failed attempt.
func backoff(base time.Duration, attempt int) time.Duration {
	return Retry{Backoff: base}.Delay(attempt)
}

// attempt runs one attempt of run r of t through t's executor, telling
// the Observer it started, and returns r with its outcome (finish).
func (e *Engine) attempt(ctx context.Context, t *Task, r Run, ev *Event, prev *Previous) (Run, ExecResult, error) {
	e.observe(LifecycleStarted, t, r)
	var res ExecResult
	var xerr error
	if ex, ok := e.executors[t.ExecutorName()]; ok {
		res, xerr = e.execute(ctx, ex, t, r, ev, prev)
	} else {
		xerr = fmt.Errorf("%w: no executor %q", ErrInvalid, t.ExecutorName())
	}
	return e.finish(r, res, xerr), res, xerr
}

// execute runs one attempt with the task's timeout, recovering a panic.
func (e *Engine) execute(ctx context.Context, ex Executor, t *Task, r Run, ev *Event, prev *Previous) (res ExecResult, err error) {
	timeout := e.runTimeout
	if t.Budget.MaxWall > 0 {
		timeout = t.Budget.MaxWall + WallGrace
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			res, err = ExecResult{}, fmt.Errorf("trigger: executor %q panicked: %v", t.ExecutorName(), p)
		}
	}()
	return ex.Execute(ctx, ExecRun{Task: t.Clone(), RunID: r.ID, DueAt: r.DueAt, Attempt: r.Attempt, Event: ev, Previous: prev})
}

// finish fills in the outcome of an attempt: succeeded or failed.
func (e *Engine) finish(r Run, res ExecResult, err error) Run {
	r.FinishedAt = e.clock.Now()
	if r.FinishedAt.Before(r.StartedAt) {
		r.FinishedAt = r.StartedAt
	}
	if res.Usage.Check() == nil {
		r.Consumed = res.Usage
	}
	if err != nil {
		r.Status, r.Error = RunFailed, clip(err.Error())
		if r.Error == "" {
			r.Error = "failed"
		}
		return r
	}
	r.Status, r.Result = RunSucceeded, clip(res.Result)
	if len(res.Approvals) > 0 {
		r.Status = RunWaiting
		r.Approvals = make([]Approval, len(res.Approvals))
		for i, a := range res.Approvals {
			a.Outcome = ""
			a.ID, a.Summary = clip(a.ID), clip(a.Summary)
			r.Approvals[i] = a
		}
	}
	return r
}

// clip makes s valid UTF-8 text without NUL of at most MaxTextLen bytes.
func clip(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	if len(s) <= MaxTextLen {
		return s
	}
	s = s[:MaxTextLen]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
