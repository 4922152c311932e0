package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Signal is what Orchestrator.Inject, Cancel and Pause tell the running
// loop of a conversation, through a Control.
type Signal string

// The signals of a Control.
const (
	// SignalInject: text was pushed onto the conversation's inject queue;
	// the running loop takes it at its next turn boundary.
	SignalInject Signal = "inject"
	// SignalCancel: the running loop stops now (Orchestrator.Cancel).
	SignalCancel Signal = "cancel"
	// SignalPause: the running loop stops at its next turn boundary
	// (Orchestrator.Pause).
	SignalPause Signal = "pause"
)

// Errors of steering (Orchestrator.Inject, Cancel, Pause) and of a Control.
var (
	// ErrNotRunning: Cancel or Pause found no loop running for the
	// conversation (none started, or it has ended).
	ErrNotRunning = errors.New("agent: no loop is running for the conversation")
	// ErrQueueFull: Inject found the conversation's inject queue full
	// (MemoryControlConfig.MaxQueued or MaxQueuedBytes, or the Redis
	// Control's): nothing was queued.
	ErrQueueFull = errors.New("agent: the conversation's inject queue is full")
	// ErrCancelled is wrapped by the error of a run stopped by
	// Orchestrator.Cancel (with StatusCancelled).
	ErrCancelled = errors.New("agent: the run was cancelled by Orchestrator.Cancel")
)

// Begun is what Control.Begin finds when a conversation's loop starts.
type Begun struct {
	// Paused: the conversation's previous run ended paused (Control.End
	// with paused set) and no Begin with take has taken it since (nor
	// Forget removed it).
	Paused bool
	// Queued are the texts pushed onto the inject queue while no loop
	// ran, oldest first; Begin removes them from the queue.
	Queued []string
}

// Control is how an Orchestrator steers the running loop of a
// conversation: a running marker, an inject queue and signals. Replicas
// that share one (redispool.NewControl) steer each other's loops: Cancel
// sent to a replica that is not running the loop reaches the one that
// is. The default, NewMemoryControl, is one process's.
//
// A conversation is named by its tenant and its ID; an implementation
// keeps different pairs apart even when the IDs contain separators. All
// methods are safe for concurrent use.
type Control interface {
	// Begin marks the conversation's loop running, as runID, and with
	// take takes what waits for it (Begun): the orchestrator takes them
	// for a user's message (SourceUser) only, and leaves them to the
	// user's next message when a trigger or a delivery starts the run.
	// The marker stays until End; an implementation shared by processes
	// lets the marker of a process that died expire (and keeps a live
	// one's alive).
	Begin(ctx context.Context, tenant, conversation, runID string, take bool) (Begun, error)
	// End removes the marker if it is still runID's. With paused, the
	// next Begin of the conversation reports Begun.Paused.
	End(ctx context.Context, tenant, conversation, runID string, paused bool) error
	// Running returns the runID of the conversation's marker; "" when no
	// loop runs.
	Running(ctx context.Context, tenant, conversation string) (string, error)
	// Push appends text to the conversation's inject queue, or fails with
	// ErrQueueFull when the queue's bounds do not take it.
	Push(ctx context.Context, tenant, conversation, text string) error
	// Drain removes and returns the queued texts, oldest first.
	Drain(ctx context.Context, tenant, conversation string) ([]string, error)
	// Forget removes what waits for the conversation's next run: its
	// queued texts and its paused flag (Orchestrator.Forget).
	Forget(ctx context.Context, tenant, conversation string) error
	// Publish sends sig to the conversation's loop runID (the run ID
	// Running returned), in every process sharing the Control: the
	// subscriptions for runID hear it. When runID is not the
	// conversation's running loop — it ended, and maybe the next run
	// began — nothing is sent and Publish returns ErrNotRunning, checked
	// and sent atomically: a signal meant for one run never reaches the
	// conversation's next one. A running loop with nobody listening is not
	// an error.
	Publish(ctx context.Context, tenant, conversation, runID string, sig Signal) error
	// Subscribe calls fn with each signal published for the
	// conversation's run runID until stop is called; signals for its
	// other runs are not heard. It may come before Begin marks runID
	// running. fn must not block; it may be called from another
	// goroutine, and until stop returns.
	Subscribe(tenant, conversation, runID string, fn func(Signal)) (stop func())
}

// Defaults of a MemoryControlConfig (redispool's Control uses them too).
const (
	// DefaultMaxQueued is how many texts a conversation's inject queue
	// holds.
	DefaultMaxQueued = 16
	// DefaultMaxQueuedBytes is how many bytes of text it holds.
	DefaultMaxQueuedBytes = 64 << 10
	// DefaultMaxQueues is how many conversations a MemoryControl holds
	// queued texts for at once.
	DefaultMaxQueues = 10000
)

// MemoryControlConfig configures NewMemoryControl. The zero value means
// the documented defaults.
type MemoryControlConfig struct {
	// MaxQueued bounds the texts of a conversation's inject queue.
	// Negative is an error. Default DefaultMaxQueued (16).
	MaxQueued int
	// MaxQueuedBytes bounds their bytes. Negative is an error. Default
	// DefaultMaxQueuedBytes (64 KiB).
	MaxQueuedBytes int
	// MaxQueues bounds the conversations with texts queued (those whose
	// next message has not come yet): a Push that would start one more
	// fails with ErrQueueFull. It bounds the paused flags waiting for a
	// conversation's next message too: a run paused beyond it ends paused
	// as usual, but its next message gets no note to continue the task.
	// Negative is an error. Default DefaultMaxQueues (10000).
	MaxQueues int
}

// MemoryControl is the Control of one process (the default of
// Config.Control). Its running markers do not expire: they die with the
// process, and End always runs when a loop ends.
type MemoryControl struct {
	maxN, maxB, maxQ int

	mu      sync.Mutex
	running map[convKey]string
	paused  map[convKey]bool
	queues  map[convKey]*memQueue
	subs    map[convKey][]*memSub
	// locals: the runs of this process's orchestrators subscribed
	// without a callback (beginLocal), one per conversation.
	locals map[convKey]localRun
}

// localRun is a run begun with beginLocal.
type localRun struct {
	id string
	st *steering
}

type memQueue struct {
	texts []string
	bytes int
}

type memSub struct {
	runID string
	fn    func(Signal)
}

var _ Control = (*MemoryControl)(nil)

// NewMemoryControl returns an empty MemoryControl, or an error wrapping
// ErrInvalidConfig.
func NewMemoryControl(cfg MemoryControlConfig) (*MemoryControl, error) {
	if cfg.MaxQueued < 0 || cfg.MaxQueuedBytes < 0 || cfg.MaxQueues < 0 {
		return nil, fmt.Errorf("%w: negative MemoryControlConfig.MaxQueued, MaxQueuedBytes or MaxQueues", ErrInvalidConfig)
	}
	return &MemoryControl{
		maxN:    cmp.Or(cfg.MaxQueued, DefaultMaxQueued),
		maxB:    cmp.Or(cfg.MaxQueuedBytes, DefaultMaxQueuedBytes),
		maxQ:    cmp.Or(cfg.MaxQueues, DefaultMaxQueues),
		running: make(map[convKey]string),
		paused:  make(map[convKey]bool),
		queues:  make(map[convKey]*memQueue),
		subs:    make(map[convKey][]*memSub),
		locals:  make(map[convKey]localRun),
	}, nil
}

// Begin implements Control.
func (m *MemoryControl) Begin(ctx context.Context, tenant, conversation, runID string, take bool) (Begun, error) {
	k := convKey{tenant, conversation}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.beginLocked(k, runID, take), nil
}

// beginLocal is Begin with st subscribed, without allocating (the
// default Control is on every run's path); false when another run of the
// conversation holds the slot (the caller subscribes as usual).
func (m *MemoryControl) beginLocal(k convKey, runID string, take bool, st *steering) (Begun, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, taken := m.locals[k]; taken {
		return Begun{}, false
	}
	m.locals[k] = localRun{runID, st}
	return m.beginLocked(k, runID, take), true
}

// endLocal is End for a run begun with beginLocal.
func (m *MemoryControl) endLocal(k convKey, runID string, st *steering, paused bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locals[k].st == st {
		delete(m.locals, k)
	}
	m.endLocked(k, runID, paused)
}

func (m *MemoryControl) beginLocked(k convKey, runID string, take bool) Begun {
	m.running[k] = runID
	var b Begun
	if !take {
		return b
	}
	if m.paused[k] {
		b.Paused = true
		delete(m.paused, k)
	}
	if q := m.queues[k]; q != nil {
		b.Queued = q.texts
		delete(m.queues, k)
	}
	return b
}

// End implements Control.
func (m *MemoryControl) End(ctx context.Context, tenant, conversation, runID string, paused bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.endLocked(convKey{tenant, conversation}, runID, paused)
	return nil
}

func (m *MemoryControl) endLocked(k convKey, runID string, paused bool) {
	if m.running[k] == runID {
		delete(m.running, k)
	}
	if paused && (m.paused[k] || len(m.paused) < m.maxQ) {
		m.paused[k] = true // bounded as the queues are (MaxQueues)
	}
}

// Running implements Control.
func (m *MemoryControl) Running(ctx context.Context, tenant, conversation string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running[convKey{tenant, conversation}], nil
}

// Push implements Control.
func (m *MemoryControl) Push(ctx context.Context, tenant, conversation, text string) error {
	k := convKey{tenant, conversation}
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queues[k]
	if q == nil {
		if len(m.queues) >= m.maxQ {
			return ErrQueueFull
		}
		q = &memQueue{}
	}
	if len(q.texts) >= m.maxN || q.bytes+len(text) > m.maxB {
		return ErrQueueFull
	}
	q.texts = append(q.texts, text)
	q.bytes += len(text)
	m.queues[k] = q
	return nil
}

// Drain implements Control.
func (m *MemoryControl) Drain(ctx context.Context, tenant, conversation string) ([]string, error) {
	k := convKey{tenant, conversation}
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.queues[k]
	if q == nil {
		return nil, nil
	}
	delete(m.queues, k)
	return q.texts, nil
}

// Forget implements Control.
func (m *MemoryControl) Forget(ctx context.Context, tenant, conversation string) error {
	k := convKey{tenant, conversation}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.queues, k)
	delete(m.paused, k)
	return nil
}

// Publish implements Control: the subscribers are called before it
// returns.
func (m *MemoryControl) Publish(ctx context.Context, tenant, conversation, runID string, sig Signal) error {
	k := convKey{tenant, conversation}
	m.mu.Lock()
	if runID == "" || m.running[k] != runID {
		m.mu.Unlock()
		return ErrNotRunning
	}
	var subs []*memSub
	for _, s := range m.subs[k] {
		if s.runID == runID {
			subs = append(subs, s)
		}
	}
	var local *steering
	if l := m.locals[k]; l.id == runID {
		local = l.st
	}
	m.mu.Unlock()
	// Called outside the lock: a callback may call the Control. The run
	// may end meanwhile; its callbacks then act on a run that is over.
	if local != nil {
		local.hear(sig)
	}
	for _, s := range subs {
		s.fn(sig)
	}
	return nil
}

// Subscribe implements Control.
func (m *MemoryControl) Subscribe(tenant, conversation, runID string, fn func(Signal)) (stop func()) {
	k := convKey{tenant, conversation}
	s := &memSub{runID: runID, fn: fn}
	m.mu.Lock()
	m.subs[k] = append(m.subs[k], s)
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		l := slices.DeleteFunc(m.subs[k], func(x *memSub) bool { return x == s })
		if len(l) == 0 {
			delete(m.subs, k)
		} else {
			m.subs[k] = l
		}
	}
}
