package trigger

import (
	"context"
	"fmt"
	"time"
)

// RouteKind says where a run's result goes.
type RouteKind string

// The routes.
const (
	// RouteNotify sends the result to the task's Output channel: the
	// default when the task has one.
	RouteNotify RouteKind = "notify"
	// RouteSilent keeps the result in the run history only: the default
	// when the task has no Output channel.
	RouteSilent RouteKind = "silent"
	// RouteMemory stores the result as a memory item of the tenant, with
	// the task id as its provenance (Config.Memory).
	RouteMemory RouteKind = "memory_update"
	// RouteChain runs the tenant's task Route.Next once, at once, with
	// this run's output when Route.PassOutput is set.
	RouteChain RouteKind = "chain_next"
)

// Route says where a run's result goes, beside the run history.
type Route struct {
	// Kind is one of the RouteKind constants. Empty: RouteNotify when the
	// task has an Output channel, RouteSilent otherwise.
	Kind RouteKind `json:"kind,omitempty"`
	// Next is the id of the tenant's task a RouteChain runs next.
	Next string `json:"next,omitempty"`
	// PassOutput gives the next task this run's result (RouteChain).
	PassOutput bool `json:"pass_output,omitempty"`
}

// Check reports an unknown kind, or a Next that does not fit the kind.
func (r Route) Check() error {
	switch r.Kind {
	case "", RouteNotify, RouteSilent, RouteMemory:
		if r.Next != "" || r.PassOutput {
			return fmt.Errorf("%w: route: Next and PassOutput are for %s", ErrInvalid, RouteChain)
		}
		return nil
	case RouteChain:
		return checkID("route Next", r.Next)
	}
	return fmt.Errorf("%w: route kind %q", ErrInvalid, string(r.Kind))
}

// NotificationKind says what a notification is about.
type NotificationKind string

// The notification kinds.
const (
	// NotifyResult carries a run's result (RouteNotify).
	NotifyResult NotificationKind = "result"
	// NotifyApproval tells the user an action of a run waits for their
	// confirmation.
	NotifyApproval NotificationKind = "approval"
	// NotifyFailure tells the user a task is DEAD: its run failed on
	// its last attempt.
	NotifyFailure NotificationKind = "failure"
	// NotifyRefused tells the user a run was refused (ErrRefused: a
	// spend limit reached) and did nothing; Text is the executor's
	// reason for the user. The task keeps its schedule.
	NotifyRefused NotificationKind = "refused"
	// NotifyExpired tells the user the approvals a run asked for
	// (NotifyApproval) expired unanswered, so nothing ran; not sent when
	// the reply to the user's own message told them (Run.ResultShown).
	NotifyExpired NotificationKind = "expired"
)

// Notification is a message the engine sends a tenant about a task.
type Notification struct {
	Kind     NotificationKind
	TenantID string
	TaskID   string
	// TaskName is the task's Name, for a title.
	TaskName string
	RunID    string
	// Channel and Target are the task's Output.
	Channel, Target string
	// Text is what to show the user: the result, or what happened.
	Text string
	// Metadata holds details a channel may use ("approval_ids").
	Metadata map[string]string
	// IdempotencyKey names this notice: the same on every delivery of
	// it (a retry, another replica after a restart), different for
	// another notice (NotificationKey of RunID and Kind). A Notifier
	// that must not show a notice twice keeps the keys it delivered.
	IdempotencyKey string
}

// NotificationKey is the IdempotencyKey of the notification of kind
// about run runID.
func NotificationKey(runID string, kind NotificationKind) string {
	return runID + "/" + string(kind)
}

// Notifier delivers notifications on one channel (chat, email, push).
// Notify should honour ctx; an error makes the engine try again a few
// times, then log the failure on the run (the run's own result is kept).
// Delivery is at least once: a notification may repeat after a retry or a
// restart, with the same IdempotencyKey. With a Store that is a
// NotifyDispatcher (trigger/rivertrigger), every notice about a run is
// queued with the record it follows and delivered by whichever replica
// works it, after the one that recorded the run died too.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// NotifierFunc adapts a function to a Notifier.
type NotifierFunc func(ctx context.Context, n Notification) error

// Notify calls f.
func (f NotifierFunc) Notify(ctx context.Context, n Notification) error { return f(ctx, n) }

// LifecycleKind is a step of a task's life an Observer hears of.
type LifecycleKind string

// The lifecycle steps.
const (
	LifecycleScheduled      LifecycleKind = "scheduled"       // queued for a due time (NextRun)
	LifecycleStarted        LifecycleKind = "started"         // an attempt began
	LifecycleCompleted      LifecycleKind = "completed"       // a run succeeded
	LifecycleFailed         LifecycleKind = "failed"          // an attempt failed; another follows
	LifecycleDead           LifecycleKind = "dead"            // the last attempt failed: the task is DEAD
	LifecycleBudgetWarning  LifecycleKind = "budget_warning"  // a run used 80% of a budget limit
	LifecycleBudgetExceeded LifecycleKind = "budget_exceeded" // a run reached a budget limit
	LifecycleWaiting        LifecycleKind = "waiting"         // a run waits for the user's approval
	LifecycleExpired        LifecycleKind = "expired"         // a waiting run's approvals expired
	LifecycleRefused        LifecycleKind = "refused"         // a run was refused (ErrRefused); no attempt follows
)

// Lifecycle is one step of a task's life, as an Observer hears of it.
type Lifecycle struct {
	Kind     LifecycleKind
	TenantID string
	TaskID   string
	RunID    string // empty for LifecycleScheduled
	// Attempt counts the run's attempts (LifecycleFailed: the one that
	// failed).
	Attempt int
	// At is when it happened; Due, the run's due time or NextRun.
	At, Due time.Time
	// Err is the failure of LifecycleFailed and LifecycleDead, and the
	// executor's error of LifecycleRefused.
	Err string
	// Usage is what the run consumed, when it ended.
	Usage Usage
}

// Observer hears of each task's lifecycle: a dashboard, an alert. The
// engine calls it from a goroutine of its own, in order, never blocking a
// run: when the observer falls MaxObserverBacklog steps behind, further
// steps are dropped (and counted in the log).
type Observer func(Lifecycle)

// MaxObserverBacklog is how many lifecycle steps wait for a slow
// Observer before the engine drops them.
const MaxObserverBacklog = 1024
