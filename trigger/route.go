package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/memory"
)

// Route delivery.
const (
	// notifyAttempts is how often a notification is tried.
	notifyAttempts = 3
	// notifyBackoff is the wait after a failed notification, doubling.
	notifyBackoff = time.Second
	// deliverTimeout bounds one notification or memory write.
	deliverTimeout = 30 * time.Second
)

// ChainRunID returns the id of the run of task next that run prevRunID
// of another task chained to (RouteChain).
func ChainRunID(next, prevRunID string) string {
	return fitID(next + "@after:" + prevRunID)
}

// checkRoute refuses a task whose route the engine cannot deliver.
func (e *Engine) checkRoute(t *Task) error {
	switch t.RouteKind() {
	case RouteNotify:
		if e.notifiers[t.Output.Channel] == nil {
			return fmt.Errorf("%w: task %q: no notifier for channel %q", ErrInvalid, t.ID, t.Output.Channel)
		}
	case RouteMemory:
		if e.memory == nil {
			return fmt.Errorf("%w: task %q: a %s route needs Config.Memory", ErrInvalid, t.ID, RouteMemory)
		}
	}
	return nil
}

// deliver sends a run's outcome along t's route once the run is
// recorded: a succeeded run's result to its notifier, memory or next
// task; a dead run's failure, or a refused run's reason for the user, to
// the task's channel. What fails is logged
// and kept on the run (Run.RouteError), never changing its status.
func (e *Engine) deliver(ctx context.Context, t *Task, r Run, res ExecResult, depth int, queued bool) {
	if ctx.Err() != nil {
		return // stopping: the result stays in the history
	}
	var err error
	switch {
	case r.Status == RunDead || r.Status == RunRefused || r.Status == RunSucceeded && t.RouteKind() == RouteNotify:
		n, ok := RunNotice(t, r)
		if !ok || queued {
			return // nothing to tell, or the store delivers it (NotifyDispatcher)
		}
		err = e.send(ctx, ctx.Done(), n)
	case r.Status != RunSucceeded:
		return
	case t.RouteKind() == RouteMemory:
		if r.Result == "" {
			return
		}
		mctx, cancel := context.WithTimeout(ctx, deliverTimeout)
		_, err = e.memory.Remember(mctx, t.TenantID, memory.Item{
			Text: r.Result, Kind: "task_result", Source: memory.Provenance{TaskID: t.ID, ConversationID: t.ConversationID},
			Origin: memory.OriginTrigger, // the run's answer, from untrusted input: not a fact about the user
		})
		cancel()
	case t.RouteKind() == RouteChain:
		err = e.chain(ctx, t, r, depth)
	}
	if err == nil {
		return
	}
	e.log.Error("trigger: delivering a run's result", "tenant", t.TenantID, "task", t.ID, "run", r.ID,
		"route", string(t.RouteKind()), "err", err)
	r.RouteError = clip(string(t.RouteKind()) + ": " + err.Error())
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if uerr := e.store.UpdateRun(wctx, r); uerr != nil {
		e.log.Error("trigger: recording a route failure", "run", r.ID, "err", uerr)
	}
}

// RunNotice returns the notification that run r of t, as recorded (t
// after the run), sends on t's channel, if any: the failure of a dead run
// (NotifyFailure), the reason of a refused one (NotifyRefused), the result
// of a succeeded run whose route notifies (NotifyResult; not when
// Run.ResultShown), the approvals a waiting run asks for (NotifyApproval,
// with their ids in Metadata["approval_ids"]), and the news that a run's
// approvals expired unanswered (NotifyExpired; not when Run.ResultShown).
// A NotifyDispatcher queues it in the transaction that records r so.
func RunNotice(t *Task, r Run) (Notification, bool) {
	if t == nil || t.Output.Channel == "" {
		return Notification{}, false
	}
	var kind NotificationKind
	var text string
	var meta map[string]string
	switch {
	case r.Status == RunDead:
		kind, text = NotifyFailure, fmt.Sprintf("The task %q stopped: its run failed %d times, last with: %s",
			t.Name, r.Attempt, r.Error)
	case r.Status == RunRefused:
		kind, text = NotifyRefused, refusalText(t, r)
	case r.Status == RunSucceeded && t.RouteKind() == RouteNotify && !r.ResultShown:
		kind, text = NotifyResult, r.Result
	case r.Status == RunWaiting && len(r.Approvals) > 0:
		ids := make([]string, 0, len(r.Approvals))
		lines := make([]string, 0, len(r.Approvals))
		for _, a := range r.Approvals {
			ids = append(ids, a.ID)
			lines = append(lines, "- "+textsafe.Line(a.Summary)) // a summary cannot add a line of its own
		}
		kind = NotifyApproval
		text = fmt.Sprintf("%q needs your confirmation before it goes on:\n%s", t.Name, strings.Join(lines, "\n"))
		meta = map[string]string{"approval_ids": strings.Join(ids, ",")}
	case r.Status == RunExpired && !r.ResultShown:
		kind = NotifyExpired
		text = fmt.Sprintf("%q did not go on: what it asked you to confirm was not confirmed in time, so nothing was done.", t.Name)
	default:
		return Notification{}, false
	}
	return notice(t, r, kind, text, meta), true
}

// notice is the notification of kind about run r of t.
func notice(t *Task, r Run, kind NotificationKind, text string, meta map[string]string) Notification {
	return Notification{Kind: kind, TenantID: t.TenantID, TaskID: t.ID, TaskName: t.Name, RunID: r.ID,
		Channel: t.Output.Channel, Target: t.Output.Target, Text: text, Metadata: meta,
		IdempotencyKey: NotificationKey(r.ID, kind)}
}

// send delivers note on its channel, trying notifyAttempts times.
func (e *Engine) send(ctx context.Context, stop <-chan struct{}, note Notification) error {
	n := e.notifiers[note.Channel]
	if n == nil {
		return fmt.Errorf("no notifier for channel %q", note.Channel)
	}
	var err error
	for i := range notifyAttempts {
		if i > 0 {
			tm := e.clock.NewTimer(notifyBackoff << (i - 1))
			select {
			case <-tm.C():
			case <-stop:
				tm.Stop()
				return fmt.Errorf("notifier %q: %w (the engine stopped before a retry)", note.Channel, err)
			}
		}
		err = e.callNotifier(ctx, n, note)
		if err == nil {
			return nil
		}
	}
	return fmt.Errorf("notifier %q failed %d times: %w", note.Channel, notifyAttempts, err)
}

// HandleNotification implements [NotificationHandler]: one attempt to
// deliver n, a notice a NotifyDispatcher queued with its run's record, on
// the Notifier of n.Channel. A request for approvals (NotifyApproval)
// whose run no longer waits (the user answered meanwhile, or the
// approvals expired) is dropped, not delivered. On the last attempt
// (last) a failure is logged and kept on the run (Run.RouteError), as the
// engine's own delivery does; the run's status and result stand.
func (e *Engine) HandleNotification(ctx context.Context, n Notification, last bool) error {
	if n.Kind == NotifyApproval {
		if waits, err := e.stillWaiting(ctx, n); err != nil || !waits {
			return err
		}
	}
	var err error
	if nf := e.notifiers[n.Channel]; nf == nil {
		err = fmt.Errorf("no notifier for channel %q", n.Channel)
	} else {
		err = e.callNotifier(ctx, nf, n)
	}
	if err == nil || !last || ctx.Err() != nil {
		return err
	}
	err = fmt.Errorf("notifier %q failed its last attempt: %w", n.Channel, err)
	e.log.Error("trigger: delivering a notice", "tenant", n.TenantID, "task", n.TaskID, "run", n.RunID,
		"kind", string(n.Kind), "key", n.IdempotencyKey, "err", err)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	return errors.Join(err, e.keepRouteError(wctx, n, err))
}

// stillWaiting reports whether the run n asks approvals for still waits
// for one of them.
func (e *Engine) stillWaiting(ctx context.Context, n Notification) (bool, error) {
	runs, err := e.store.Runs(ctx, n.TenantID, n.TaskID, 0)
	if errors.Is(err, ErrNotFound) {
		return false, nil // the task is gone
	}
	if err != nil {
		return false, err
	}
	for _, r := range runs {
		if r.ID == n.RunID {
			waits := r.Status == RunWaiting && slices.ContainsFunc(r.Approvals, func(a Approval) bool { return a.Outcome == "" })
			if !waits {
				e.log.Info("trigger: an approval request whose run no longer waits is not sent", "tenant", n.TenantID,
					"task", n.TaskID, "run", n.RunID, "status", string(r.Status))
			}
			return waits, nil
		}
	}
	return false, nil // dropped from the history
}

// keepRouteError records the failure to deliver n on its run
// (Run.RouteError). On a RunSwapper it is a compare and set, read again
// when another writer changed the run first (a settlement of the run
// whose approvals n asked for), so that it never writes back an older
// record.
func (e *Engine) keepRouteError(ctx context.Context, n Notification, failure error) error {
	for i := 0; ; i++ {
		t, err := e.store.Get(ctx, n.TenantID, n.TaskID)
		if err != nil {
			return err
		}
		old, ok := e.findRun(ctx, t, n.RunID)
		if !ok {
			return nil
		}
		r := old
		r.RouteError = clip(string(t.RouteKind()) + ": " + failure.Error())
		sw, swaps := e.store.(RunSwapper)
		if !swaps {
			return e.store.UpdateRun(ctx, r)
		}
		err = sw.SwapRun(ctx, old, r)
		if !errors.Is(err, ErrConflict) || i >= conflictRetries {
			return err
		}
	}
}

// callNotifier calls n within deliverTimeout, recovering a panic.
func (e *Engine) callNotifier(ctx context.Context, n Notifier, note Notification) (err error) {
	ctx, cancel := context.WithTimeout(ctx, deliverTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("notifier panicked: %v", p)
		}
	}()
	return n.Notify(ctx, note)
}

// chain runs the tenant's task t.Route.Next once, now, after run r of t:
// through the Dispatcher when there is one, in this goroutine otherwise.
func (e *Engine) chain(ctx context.Context, t *Task, r Run, depth int) error {
	next, err := e.store.Get(ctx, t.TenantID, t.Route.Next)
	if err != nil {
		return err
	}
	if next.Status != StatusActive {
		return fmt.Errorf("the next task %q is %s", next.ID, next.Status)
	}
	prev := &Previous{TaskID: t.ID, RunID: r.ID, Depth: depth + 1}
	if prev.Depth > MaxChainDepth {
		return fmt.Errorf("a chain of %d runs: not running %q", MaxChainDepth, next.ID)
	}
	if t.Route.PassOutput {
		prev.Output = r.Result
	}
	if disp, ok := e.store.(Dispatcher); ok {
		return disp.Enqueue(ctx, Due{TenantID: next.TenantID, TaskID: next.ID, DueAt: e.clock.Now(),
			Attempt: 1, MaxAttempts: next.Retry.Attempts(), Previous: prev})
	}
	now := e.clock.Now()
	nr := Run{ID: ChainRunID(next.ID, r.ID), TaskID: next.ID, TenantID: next.TenantID, DueAt: now,
		Status: RunRunning, StartedAt: now, Attempt: 1}
	if err := e.store.AddRun(ctx, nr); err != nil {
		if errors.Is(err, ErrConflict) {
			return nil // chained already
		}
		return err
	}
	if wg := e.runWG.Load(); wg != nil { // under Run: a run of its own
		done := e.startWork()
		wg.Go(func() {
			defer done()
			if e.acquire(ctx) != nil {
				e.park(oneOff{next, nr, nil, prev})
				return
			}
			e.runOneOff(ctx, next, nr, nil, prev, true)
		})
		return nil
	}
	e.runOneOff(ctx, next, nr, nil, prev, false) // RunNow's: under its slot
	return nil
}

// askApproval tells the task's channel, if it has one, that actions of
// run r wait for the user's confirmation (RunNotice's NotifyApproval).
func (e *Engine) askApproval(ctx context.Context, t *Task, r Run) {
	n, ok := RunNotice(t, r)
	if !ok || n.Kind != NotifyApproval {
		return
	}
	if err := e.send(ctx, ctx.Done(), n); err != nil {
		e.log.Error("trigger: asking for an approval", "tenant", t.TenantID, "task", t.ID, "run", r.ID, "err", err)
	}
}

// tellExpired tells the user, on the channel that asked them
// (askApproval), that the run's approvals expired and nothing ran, unless
// the reply to their own message told them already (RunNotice's
// NotifyExpired).
func (e *Engine) tellExpired(ctx context.Context, t *Task, r Run) {
	n, ok := RunNotice(t, r)
	if !ok || n.Kind != NotifyExpired {
		return
	}
	if err := e.send(ctx, ctx.Done(), n); err != nil {
		e.log.Error("trigger: telling of an expired approval", "tenant", t.TenantID, "task", t.ID, "run", r.ID, "err", err)
	}
}

// observerQueue hands lifecycle steps to an Observer in order, from a
// goroutine of its own, dropping steps when it falls behind.
type observerQueue struct {
	fn  Observer
	log *slog.Logger

	mu      sync.Mutex
	queue   []Lifecycle
	running bool
	dropped int
}

func newObserverQueue(fn Observer, log *slog.Logger) *observerQueue {
	return &observerQueue{fn: fn, log: log}
}

// emit queues a step; it never blocks.
func (q *observerQueue) emit(l Lifecycle) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) >= MaxObserverBacklog {
		q.dropped++
		if q.dropped == 1 || q.dropped%1000 == 0 {
			q.log.Warn("trigger: the observer is behind; lifecycle steps dropped", "dropped", q.dropped)
		}
		return
	}
	q.queue = append(q.queue, l)
	if !q.running {
		q.running = true
		go q.drain()
	}
}

// drain calls the observer until the queue is empty, then ends.
func (q *observerQueue) drain() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 {
			q.running = false
			q.mu.Unlock()
			return
		}
		l := q.queue[0]
		q.queue = q.queue[1:]
		q.mu.Unlock()
		func() {
			defer func() {
				if p := recover(); p != nil {
					q.log.Error("trigger: the observer panicked", "panic", fmt.Sprint(p))
				}
			}()
			q.fn(l)
		}()
	}
}

// observe tells the Observer, if any, of a step.
func (e *Engine) observe(kind LifecycleKind, t *Task, r Run) {
	if e.observers == nil {
		return
	}
	l := Lifecycle{Kind: kind, TenantID: t.TenantID, TaskID: t.ID, RunID: r.ID, Attempt: r.Attempt,
		At: e.clock.Now(), Due: r.DueAt, Err: r.Error, Usage: r.Consumed}
	if kind == LifecycleScheduled {
		l.RunID, l.Attempt, l.Due, l.Err, l.Usage = "", 0, t.NextRun, "", Usage{}
	}
	e.observers.emit(l)
}

// ended tells the Observer how an attempt ended, and delivers the
// outcome of a run that is over along its task's route.
func (e *Engine) ended(ctx context.Context, t *Task, r Run, res ExecResult, prev *Previous) {
	e.endedAs(ctx, t, r, res, prev, false)
}

// finished is ended for a run recorded by a Dispatcher's Finish (with t),
// whose notice a NotifyDispatcher queued in its transaction.
func (e *Engine) finished(ctx context.Context, t *Task, r Run, res ExecResult, prev *Previous) {
	e.endedAs(ctx, t, r, res, prev, e.notifiesQueued(ctx))
}

// notifiesQueued reports whether the store's Finish and SwapRun, called
// with ctx, queue the notices of what they record (NotifyDispatcher).
func (e *Engine) notifiesQueued(ctx context.Context) bool {
	d, ok := e.store.(NotifyDispatcher)
	return ok && d.DispatchesNotifications(ctx)
}

// endedAs is ended; queued says the run's notice is queued already.
func (e *Engine) endedAs(ctx context.Context, t *Task, r Run, res ExecResult, prev *Previous, queued bool) {
	depth := 0
	if prev != nil {
		depth = prev.Depth
	}
	e.budgetSteps(t, r, res)
	switch r.Status {
	case RunSucceeded:
		e.observe(LifecycleCompleted, t, r)
	case RunFailed:
		e.observe(LifecycleFailed, t, r)
		return
	case RunDead:
		e.observe(LifecycleDead, t, r)
	case RunRefused:
		e.observe(LifecycleRefused, t, r)
	case RunWaiting:
		e.observe(LifecycleWaiting, t, r)
		if e.applyEarly(ctx, t, r) {
			return // the user answered before the run was recorded
		}
		e.watch(t, r)
		if !queued {
			e.askApproval(ctx, t, r)
		}
		return
	case RunExpired:
		e.observe(LifecycleExpired, t, r)
		if !queued {
			e.tellExpired(ctx, t, r)
		}
		return
	default:
		return
	}
	e.deliver(ctx, t, r, res, depth, queued)
}

// budgetSteps tells the Observer of the budget limits an attempt
// neared or reached.
func (e *Engine) budgetSteps(t *Task, r Run, res ExecResult) {
	if res.BudgetExceeded {
		e.observe(LifecycleBudgetExceeded, t, r)
	} else if res.BudgetWarning {
		e.observe(LifecycleBudgetWarning, t, r)
	}
}

// scheduled tells the Observer that t is due at its NextRun.
func (e *Engine) scheduled(t *Task) {
	if t.Status == StatusActive && !t.NextRun.IsZero() {
		e.observe(LifecycleScheduled, t, Run{})
	}
}
