package agent

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
)

// DefaultAsyncObserverBuffer is AsyncObserverConfig.Buffer's default.
const DefaultAsyncObserverBuffer = 4096

// AsyncObserverConfig configures NewAsyncObserver. The zero value is
// ready to use.
type AsyncObserverConfig struct {
	// Buffer is how many steps may wait while the observer handles one.
	// A step that finds the buffer full is dropped (Dropped counts it; the first drop
	// is logged). Default DefaultAsyncObserverBuffer.
	Buffer int
	// Logger gets the first drop and the first panic. Default
	// slog.Default().
	Logger *slog.Logger
}

// AsyncObserver delivers steps to another Observer on a goroutine of its
// own, so an observer that writes to a file or the network, or blocks,
// never holds a run up. Observe copies what a step refers to (the
// messages, the response, the result), which is the cost an
// AsyncObserver adds to a run, and queues the copy; steps reach the
// observer in the order Observe was called. Its goroutine runs while
// steps wait and ends when none do, so an AsyncObserver needs no Close;
// Flush waits for the queue to drain.
type AsyncObserver struct {
	next Observer
	max  int
	log  *slog.Logger

	mu      sync.Mutex
	queue   []queuedStep
	waiting int           // steps queued and not yet being delivered: at most max
	running bool          // the delivering goroutine runs
	queued  uint64        // steps ever queued
	done    uint64        // of those, delivered
	moved   chan struct{} // closed (and replaced) when done moves or the goroutine ends

	dropped  atomic.Uint64
	warned   atomic.Bool
	panicked atomic.Bool
}

type queuedStep struct {
	ctx context.Context
	s   Step
}

// NewAsyncObserver returns an Observer that delivers to next on its own
// goroutine. Errors: ErrInvalidConfig (a nil next, a negative Buffer).
func NewAsyncObserver(next Observer, cfg AsyncObserverConfig) (*AsyncObserver, error) {
	if next == nil {
		return nil, fmt.Errorf("%w: NewAsyncObserver needs an Observer", ErrInvalidConfig)
	}
	if cfg.Buffer < 0 {
		return nil, fmt.Errorf("%w: AsyncObserverConfig.Buffer is negative", ErrInvalidConfig)
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = DefaultAsyncObserverBuffer
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &AsyncObserver{next: next, max: cfg.Buffer, log: cfg.Logger}, nil
}

// Observe queues a copy of s, or drops it when the buffer is full.
func (a *AsyncObserver) Observe(ctx context.Context, s Step) {
	q := queuedStep{ctx: context.WithoutCancel(ctx), s: copyStep(s)}
	a.mu.Lock()
	if a.waiting >= a.max {
		a.mu.Unlock()
		a.dropped.Add(1)
		if !a.warned.Swap(true) {
			a.log.WarnContext(ctx, "agent: an async observer fell behind; steps are dropped (AsyncObserver.Dropped counts them)",
				logTenant, s.TenantID, logConversation, s.ConversationID, logRunID, s.RunID, "buffer", a.max)
		}
		return
	}
	a.queue = append(a.queue, q)
	a.waiting++
	a.queued++
	if !a.running {
		a.running = true
		go a.drain()
	}
	a.mu.Unlock()
}

// drain delivers queued steps until none wait.
func (a *AsyncObserver) drain() {
	var batch []queuedStep
	for {
		a.mu.Lock()
		clear(batch)
		batch, a.queue = a.queue, batch[:0]
		if len(batch) == 0 {
			a.running = false
			a.signal()
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		for _, q := range batch {
			a.mu.Lock()
			a.waiting--
			a.mu.Unlock()
			a.deliver(q)
			a.mu.Lock()
			a.done++
			a.signal()
			a.mu.Unlock()
		}
	}
}

// signal wakes Flush calls waiting for progress; a.mu is held.
func (a *AsyncObserver) signal() {
	if a.moved != nil {
		close(a.moved)
		a.moved = nil
	}
}

func (a *AsyncObserver) deliver(q queuedStep) {
	defer func() {
		if v := recover(); v != nil && !a.panicked.Swap(true) {
			a.log.ErrorContext(q.ctx, "agent: the Observer panicked (later panics are not logged)",
				logTenant, q.s.TenantID, logConversation, q.s.ConversationID, logRunID, q.s.RunID,
				"step", q.s.Kind.String(), "panic", maskText(fmt.Sprint(v)))
		}
	}()
	a.next.Observe(q.ctx, q.s)
}

// Dropped is how many steps were dropped because the buffer was full.
func (a *AsyncObserver) Dropped() uint64 { return a.dropped.Load() }

// Flush waits until every step queued before it was called has been
// delivered, or ctx ends (its error is returned). Steps queued meanwhile
// do not hold it up.
func (a *AsyncObserver) Flush(ctx context.Context) error {
	a.mu.Lock()
	target := a.queued
	for a.done < target {
		if a.moved == nil {
			a.moved = make(chan struct{})
		}
		moved := a.moved
		a.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
		a.mu.Lock()
	}
	a.mu.Unlock()
	return nil
}

// copyStep copies what s refers to and the run may change after Observe
// returns: the messages (the run's buffers are reused), the response,
// the record's and the result's slices.
func copyStep(s Step) Step {
	s.Request.Messages = slices.Clone(s.Request.Messages)
	if s.Response != nil {
		r := *s.Response
		s.Response = &r
	}
	if s.Message != nil {
		m := *s.Message
		s.Message = &m
	}
	if s.Approval != nil {
		ap := *s.Approval
		s.Approval = &ap
	}
	s.Recalled = slices.Clone(s.Recalled)
	if s.Result != nil {
		res := *s.Result
		res.ToolCalls = slices.Clone(res.ToolCalls)
		res.PendingApprovals = slices.Clone(res.PendingApprovals)
		res.Waiting = slices.Clone(res.Waiting)
		res.Decided = slices.Clone(res.Decided)
		s.Result = &res
	}
	return s
}
