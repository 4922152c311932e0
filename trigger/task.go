package trigger

import (
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valetkit/valet/budget"
	"github.com/valetkit/valet/internal/ids"
)

// Limits Check enforces on a Task and a Run.
const (
	// MaxIDLen is the longest ID, TenantID, ConversationID, TaskID and
	// executor name, in bytes: 255, the limit of every valet package
	// (memory.MaxIDLen, agent.MaxIDLen), so a task accepted here runs in
	// memory and the orchestrator too. Run ids longer than this (a long
	// task id with its time, event or previous run) are shortened with a
	// hash.
	MaxIDLen = ids.MaxLen
	// MaxNameLen is the longest Task.Name, in bytes.
	MaxNameLen = 256
	// MaxTextLen is the longest Description, Instruction, Run.Error and
	// Run.Result, in bytes.
	MaxTextLen = 64 << 10
	// MaxPriority is the highest Task.Priority; 0 is the lowest.
	MaxPriority = 9
	// MaxAttempts is the highest Retry.MaxAttempts.
	MaxAttempts = 100
)

// DefaultExecutor is the executor of a task whose Executor is empty: the
// one that hands the task's instruction to the assistant.
const DefaultExecutor = "orchestrator"

// Status is the state of a task. Only ACTIVE tasks are due
// ([Store.Due]).
type Status string

// The task statuses.
const (
	// StatusActive: the task runs when its trigger fires.
	StatusActive Status = "ACTIVE"
	// StatusPaused: stopped by the user or a spend limit, to be resumed.
	StatusPaused Status = "PAUSED"
	// StatusDisabled: stopped by an operator.
	StatusDisabled Status = "DISABLED"
	// StatusCompleted: a one-time task that ran.
	StatusCompleted Status = "COMPLETED"
	// StatusPendingApproval: created on the assistant's initiative and
	// waiting for the user to approve it.
	StatusPendingApproval Status = "PENDING_APPROVAL"
	// StatusExpired: its time to live ended before it ran.
	StatusExpired Status = "EXPIRED"
	// StatusDead: its last run failed on its last attempt.
	StatusDead Status = "DEAD"
)

// Check reports a Status other than the constants (ErrInvalid).
func (s Status) Check() error {
	switch s {
	case StatusActive, StatusPaused, StatusDisabled, StatusCompleted,
		StatusPendingApproval, StatusExpired, StatusDead:
		return nil
	}
	return fmt.Errorf("%w: task status %q", ErrInvalid, string(s))
}

// Kind is what fires a trigger.
type Kind string

// The trigger kinds.
const (
	// KindSchedule fires at the times of a Schedule.
	KindSchedule Kind = "schedule"
	// KindEvent fires on events of a source and type whose data match a
	// filter.
	KindEvent Kind = "event"
	// KindCondition fires when a named check, polled at an interval,
	// turns from false to true.
	KindCondition Kind = "condition"
)

// Trigger says what makes a task run. Kind selects the fields that apply;
// Check refuses a field of another kind that is set.
//
//	trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{Cron: "0 9 * * *"}}
//	trigger.Trigger{Kind: trigger.KindEvent, Source: "github", Type: "issue.opened",
//		Filter: map[string]string{"repo.name": "valet"}}
//	trigger.Trigger{Kind: trigger.KindCondition, Condition: "inbox_unread", Every: 5 * time.Minute}
type Trigger struct {
	Kind Kind `json:"kind"`

	// Schedule is when a KindSchedule trigger fires.
	Schedule Schedule `json:"schedule,omitzero"`
	// Missed is what a KindSchedule trigger does about times that passed
	// while nothing ran. Default: CatchUpOnce.
	Missed MissedPolicy `json:"missed,omitempty"`

	// Source and Type select the events of a KindEvent trigger; empty
	// matches any, but at least one of them is set.
	Source string `json:"source,omitempty"`
	Type   string `json:"type,omitempty"`
	// Filter maps dotted paths into an event's data ("repo.name") to the
	// value each must equal. Optional.
	Filter map[string]string `json:"filter,omitempty"`

	// Condition names the check a KindCondition trigger polls (the field
	// is not called Check: that is the method).
	Condition string `json:"condition,omitempty"`
	// Every is how often a KindCondition trigger polls; at least
	// MinEvery.
	Every time.Duration `json:"every,omitempty"`
}

// Check reports whether g is a valid trigger, wrapping ErrInvalid with
// what is wrong when it is not.
func (g Trigger) Check() error {
	isSchedule := g.Schedule != (Schedule{}) || g.Missed != CatchUpOnce
	isEvent := g.Source != "" || g.Type != "" || len(g.Filter) > 0
	isCondition := g.Condition != "" || g.Every != 0
	switch g.Kind {
	case KindSchedule:
		if isEvent || isCondition {
			return fmt.Errorf("%w: trigger: a schedule trigger sets only Schedule and Missed", ErrInvalid)
		}
		if err := g.Schedule.Check(); err != nil {
			return err
		}
		return g.Missed.Check()
	case KindEvent:
		if isSchedule || isCondition {
			return fmt.Errorf("%w: trigger: an event trigger sets only Source, Type and Filter", ErrInvalid)
		}
		if g.Source == "" && g.Type == "" {
			return fmt.Errorf("%w: trigger: an event trigger needs a Source or a Type", ErrInvalid)
		}
		if err := checkText("trigger Source", g.Source, MaxIDLen); err != nil {
			return err
		}
		if err := checkText("trigger Type", g.Type, MaxIDLen); err != nil {
			return err
		}
		for path, v := range g.Filter {
			if err := checkPath(path); err != nil {
				return err
			}
			if err := checkText("trigger filter value", v, MaxTextLen); err != nil {
				return err
			}
		}
		return nil
	case KindCondition:
		if isSchedule || isEvent {
			return fmt.Errorf("%w: trigger: a condition trigger sets only Condition and Every", ErrInvalid)
		}
		if err := checkID("trigger Condition", g.Condition); err != nil {
			return err
		}
		if g.Every < MinEvery {
			return fmt.Errorf("%w: trigger: condition interval %s is under %s", ErrInvalid, g.Every, MinEvery)
		}
		return nil
	}
	return fmt.Errorf("%w: trigger kind %q", ErrInvalid, string(g.Kind))
}

// checkPath accepts a dotted path of non-empty segments.
func checkPath(path string) error {
	if err := checkID("trigger filter path", path); err != nil {
		return err
	}
	for seg := range strings.SplitSeq(path, ".") {
		if seg == "" {
			return fmt.Errorf("%w: trigger filter path %q has an empty segment", ErrInvalid, path)
		}
	}
	return nil
}

// Action is what a run does, as its executor reads it.
type Action struct {
	// Instruction is the task in words, as the assistant reads it.
	// Required with the default executor.
	Instruction string `json:"instruction,omitempty"`
	// Config holds settings for a custom executor. Optional.
	Config map[string]string `json:"config,omitempty"`
}

// Output is where a run's result goes.
type Output struct {
	// Channel names the notifier that delivers it ("slack", "email").
	// Empty: the result is kept in the run history only.
	Channel string `json:"channel,omitempty"`
	// Target is the recipient on that channel (a chat id, an address).
	// Only with Channel.
	Target string `json:"target,omitempty"`
}

// Retry says how often a failed run is tried again.
type Retry struct {
	// MaxAttempts is how many times a run is tried in all, at most
	// MaxAttempts (the constant). Zero: DefaultMaxAttempts.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Backoff is the wait before the second attempt, doubling after.
	// Zero: DefaultBackoff.
	Backoff time.Duration `json:"backoff,omitempty"`
}

// The defaults of a zero Retry.
const (
	DefaultMaxAttempts = 3
	DefaultBackoff     = 30 * time.Second
)

// Attempts returns MaxAttempts, or DefaultMaxAttempts when it is zero.
func (r Retry) Attempts() int {
	if r.MaxAttempts == 0 {
		return DefaultMaxAttempts
	}
	return r.MaxAttempts
}

// Delay returns the wait after the attempt-th failed attempt (from 1):
// Backoff (DefaultBackoff when zero), doubling with each attempt, at most
// MaxBackoff.
func (r Retry) Delay(attempt int) time.Duration {
	base := r.Backoff
	if base <= 0 {
		base = DefaultBackoff
	}
	d := min(base, MaxBackoff)
	for i := 1; i < attempt && d < MaxBackoff; i++ {
		d = min(2*d, MaxBackoff)
	}
	return d
}

// Check reports negative values and MaxAttempts above the limit.
func (r Retry) Check() error {
	if r.MaxAttempts < 0 || r.MaxAttempts > MaxAttempts {
		return fmt.Errorf("%w: retry: MaxAttempts %d is not in 0..%d", ErrInvalid, r.MaxAttempts, MaxAttempts)
	}
	if r.Backoff < 0 {
		return fmt.Errorf("%w: retry: negative Backoff %s", ErrInvalid, r.Backoff)
	}
	return nil
}

// Budget caps what one run of a task may spend; a zero field is no cap.
// It is [budget.Limits] (an alias: agent.Budget is the same type, so
// agentexec hands a task's budget to the orchestrator as it is), stored
// under the JSON names it always had. Its Check wraps budget.ErrInvalid;
// [Task.Check] wraps that in ErrInvalid too.
type Budget = budget.Limits

// Task is something an assistant does on its own initiative for a
// tenant: when its Trigger fires, its Executor runs its Action and the
// result goes to its Output.
type Task struct {
	// ID identifies the task within its tenant. Required.
	ID string `json:"id"`
	// TenantID is the user or organisation the task belongs to. Required.
	TenantID string `json:"tenant_id"`
	// ConversationID is the conversation the task was created in, if any.
	ConversationID string `json:"conversation_id,omitempty"`
	// Name is a short label for lists. Required.
	Name string `json:"name"`
	// Description says what the task is for. Optional.
	Description string `json:"description,omitempty"`

	Trigger Trigger `json:"trigger"`
	// Executor names the executor that runs the task. Empty:
	// DefaultExecutor.
	Executor string `json:"executor,omitempty"`
	Action   Action `json:"action"`
	Output   Output `json:"output,omitzero"`
	// Route says where a run's result goes beside the history.
	Route Route `json:"route,omitzero"`

	// Status is one of the Status constants. Required.
	Status Status `json:"status"`
	// Priority orders tasks due at the same time, 0 (the default) to
	// MaxPriority; the higher runs first.
	Priority int `json:"priority,omitempty"`
	// NextRun is when the task is next due; zero when nothing is due.
	NextRun time.Time `json:"next_run,omitzero"`
	// LastRun is when it last ran; zero before its first run.
	LastRun time.Time `json:"last_run,omitzero"`
	// ConditionMet is what a condition task's check said at its last
	// poll: the task runs when it turns from false to true.
	ConditionMet bool   `json:"condition_met,omitempty"`
	Retry        Retry  `json:"retry,omitzero"`
	Budget       Budget `json:"budget,omitzero"`
	// Model names the model the task's runs use, through the
	// executor's router (agentexec: agent.Config.Models, checked when
	// the task is created). Default "": the executor's model.
	Model string `json:"model,omitempty"`

	// CreatedAt, UpdatedAt and Revision are the store's: Create sets
	// them, Update checks Revision and advances UpdatedAt and Revision.
	CreatedAt time.Time `json:"created_at,omitzero"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	Revision  int64     `json:"revision,omitempty"`
}

// RouteKind returns t.Route.Kind, or its default: RouteNotify when t has
// an Output channel, RouteSilent otherwise.
func (t *Task) RouteKind() RouteKind {
	switch {
	case t.Route.Kind != "":
		return t.Route.Kind
	case t.Output.Channel != "":
		return RouteNotify
	}
	return RouteSilent
}

// ExecutorName returns t.Executor, or DefaultExecutor when it is empty.
func (t *Task) ExecutorName() string {
	if t.Executor == "" {
		return DefaultExecutor
	}
	return t.Executor
}

// Clone returns a deep copy of t: no map is shared with t.
func (t *Task) Clone() *Task {
	c := *t
	c.Trigger.Filter = maps.Clone(t.Trigger.Filter)
	c.Action.Config = maps.Clone(t.Action.Config)
	return &c
}

// Check reports whether t is a valid task, wrapping ErrInvalid with what
// is wrong when it is not. A nil task is invalid.
func (t *Task) Check() error {
	if t == nil {
		return fmt.Errorf("%w: nil task", ErrInvalid)
	}
	if err := checkID("task ID", t.ID); err != nil {
		return err
	}
	if err := checkID("task TenantID", t.TenantID); err != nil {
		return err
	}
	if err := checkText("task ConversationID", t.ConversationID, MaxIDLen); err != nil {
		return err
	}
	if t.Name == "" {
		return fmt.Errorf("%w: task %q: empty Name", ErrInvalid, t.ID)
	}
	for _, f := range []struct {
		what, s string
		max     int
	}{
		{"task Name", t.Name, MaxNameLen},
		{"task Description", t.Description, MaxTextLen},
		{"task Executor", t.Executor, MaxIDLen},
		{"task Instruction", t.Action.Instruction, MaxTextLen},
		{"task output Channel", t.Output.Channel, MaxIDLen},
		{"task output Target", t.Output.Target, MaxTextLen},
	} {
		if err := checkText(f.what, f.s, f.max); err != nil {
			return err
		}
	}
	if err := t.Trigger.Check(); err != nil {
		return fmt.Errorf("task %q: %w", t.ID, err)
	}
	if t.ExecutorName() == DefaultExecutor && strings.TrimSpace(t.Action.Instruction) == "" {
		return fmt.Errorf("%w: task %q: the %s executor needs an Instruction", ErrInvalid, t.ID, DefaultExecutor)
	}
	for k, v := range t.Action.Config {
		if err := checkID("task action Config key", k); err != nil {
			return err
		}
		if err := checkText("task action Config value", v, MaxTextLen); err != nil {
			return err
		}
	}
	if err := t.Route.Check(); err != nil {
		return fmt.Errorf("task %q: %w", t.ID, err)
	}
	if t.Route.Kind == RouteNotify && t.Output.Channel == "" {
		return fmt.Errorf("%w: task %q: a %s route without an Output channel", ErrInvalid, t.ID, RouteNotify)
	}
	if t.Route.Kind == RouteChain && t.Route.Next == t.ID {
		return fmt.Errorf("%w: task %q: chained to itself", ErrInvalid, t.ID)
	}
	if t.Output.Target != "" && t.Output.Channel == "" {
		return fmt.Errorf("%w: task %q: output Target without a Channel", ErrInvalid, t.ID)
	}
	if err := t.Status.Check(); err != nil {
		return fmt.Errorf("task %q: %w", t.ID, err)
	}
	if t.Priority < 0 || t.Priority > MaxPriority {
		return fmt.Errorf("%w: task %q: Priority %d is not in 0..%d", ErrInvalid, t.ID, t.Priority, MaxPriority)
	}
	if err := t.Retry.Check(); err != nil {
		return fmt.Errorf("task %q: %w", t.ID, err)
	}
	if err := t.Budget.Check(); err != nil {
		return fmt.Errorf("%w: task %q: %w", ErrInvalid, t.ID, err)
	}
	if t.Revision < 0 {
		return fmt.Errorf("%w: task %q: negative Revision", ErrInvalid, t.ID)
	}
	return nil
}

// checkText accepts valid UTF-8 up to max bytes, without NUL (which
// PostgreSQL text refuses).
func checkText(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%w: %s is %d bytes, over %d", ErrInvalid, what, len(s), max)
	}
	if !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s is not valid UTF-8 text", ErrInvalid, what)
	}
	return nil
}
