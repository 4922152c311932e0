package trigger

import (
	"fmt"
	"time"

	"github.com/valetkit/valet/budget"
)

// RunStatus is the state of one run of a task.
type RunStatus string

// The run statuses.
const (
	// RunRunning: an attempt is under way.
	RunRunning RunStatus = "running"
	// RunSucceeded: an attempt finished without error.
	RunSucceeded RunStatus = "succeeded"
	// RunFailed: an attempt failed; another may follow.
	RunFailed RunStatus = "failed"
	// RunDead: the last attempt failed; none follows.
	RunDead RunStatus = "dead"
	// RunWaiting: the attempt ended with actions waiting for the user's
	// approval (Run.Approvals); the run ends when they are settled.
	RunWaiting RunStatus = "waiting"
	// RunExpired: its approvals expired unanswered; nothing ran.
	RunExpired RunStatus = "expired"
	// RunRefused: the executor refused the run before it did anything
	// (an error wrapping ErrRefused: a spend limit reached); no attempt
	// follows, and the task keeps its schedule.
	RunRefused RunStatus = "refused"
)

// Check reports a RunStatus other than the constants (ErrInvalid).
func (s RunStatus) Check() error {
	switch s {
	case RunRunning, RunSucceeded, RunFailed, RunDead, RunWaiting, RunExpired, RunRefused:
		return nil
	}
	return fmt.Errorf("%w: run status %q", ErrInvalid, string(s))
}

// Usage is what a run consumed. It is [budget.Consumed] (an alias:
// agent.Consumed is the same type, so agentexec reports the
// orchestrator's Result.Consumed as it is), stored under the JSON names
// it always had. Its Check wraps budget.ErrInvalid; [Run.Check] wraps
// that in ErrInvalid too.
type Usage = budget.Consumed

// Run is one entry of a task's run history: one due time of the task,
// through its attempts.
type Run struct {
	// ID identifies the run, the same across its attempts and across
	// replicas: an executor may use it to make side effects idempotent.
	// For a schedule, RunID(taskID, dueAt). Required.
	ID string `json:"id"`
	// TaskID and TenantID are the task's. Required.
	TaskID   string `json:"task_id"`
	TenantID string `json:"tenant_id"`
	// DueAt is when the run was due. Required.
	DueAt time.Time `json:"due_at"`
	// StartedAt is when the current attempt started; FinishedAt when it
	// ended, zero while it runs.
	StartedAt  time.Time `json:"started_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Status is one of the RunStatus constants. Required.
	Status RunStatus `json:"status"`
	// Attempt counts the attempts, from 1.
	Attempt int `json:"attempt"`
	// Error is the failure of a failed or dead run, and the executor's
	// error of a refused one: for operators, never shown to the user.
	Error string `json:"error,omitempty"`
	// Result is the output of a succeeded run; of a refused run, the
	// reason the executor gave for the user.
	Result   string `json:"result,omitempty"`
	Consumed Usage  `json:"consumed,omitzero"`
	// Approvals are the actions of a waiting run (and how each ended).
	Approvals []Approval `json:"approvals,omitempty"`
	// RouteError is what went wrong delivering the run's outcome along
	// its task's route (a notifier that kept failing); the run's status
	// and result stand.
	RouteError string `json:"route_error,omitempty"`
	// ResultShown says the user was shown Result where they decided the
	// run's approval (the reply to their chat message, Settled.ResultShown):
	// the route records and chains it as usual but does not notify it
	// (RouteNotify), nor the expiry of a run it ended, so the user is told
	// once.
	ResultShown bool `json:"result_shown,omitempty"`
	// AgentRunID is the ID the executor gave its last attempt
	// (ExecResult.AgentRunID; with trigger/agentexec the orchestrator's
	// agent.Result.RunID, which every log line of that run carries), ""
	// when it gave none.
	AgentRunID string `json:"agent_run_id,omitempty"`
}

// RunID returns the stable id of the run of task taskID due at dueAt:
// the same for every replica and every attempt. An id that would exceed
// MaxIDLen is shortened with a hash, as EventRunID's.
func RunID(taskID string, dueAt time.Time) string {
	return fitID(taskID + "@" + dueAt.UTC().Format(time.RFC3339Nano))
}

// Check reports whether r is a valid run, wrapping ErrInvalid with what
// is wrong when it is not.
func (r Run) Check() error {
	if err := checkID("run ID", r.ID); err != nil {
		return err
	}
	if err := checkID("run TaskID", r.TaskID); err != nil {
		return err
	}
	if err := checkID("run TenantID", r.TenantID); err != nil {
		return err
	}
	if r.DueAt.IsZero() {
		return fmt.Errorf("%w: run %q: zero DueAt", ErrInvalid, r.ID)
	}
	if err := r.Status.Check(); err != nil {
		return fmt.Errorf("run %q: %w", r.ID, err)
	}
	if r.Attempt < 1 {
		return fmt.Errorf("%w: run %q: Attempt %d, counted from 1", ErrInvalid, r.ID, r.Attempt)
	}
	if r.Status == RunRunning && !r.FinishedAt.IsZero() {
		return fmt.Errorf("%w: run %q: running with a FinishedAt", ErrInvalid, r.ID)
	}
	if !r.FinishedAt.IsZero() && !r.StartedAt.IsZero() && r.FinishedAt.Before(r.StartedAt) {
		return fmt.Errorf("%w: run %q: FinishedAt before StartedAt", ErrInvalid, r.ID)
	}
	if err := checkText("run Error", r.Error, MaxTextLen); err != nil {
		return err
	}
	if err := checkText("run Result", r.Result, MaxTextLen); err != nil {
		return err
	}
	if err := checkText("run RouteError", r.RouteError, MaxTextLen); err != nil {
		return err
	}
	if err := checkText("run AgentRunID", r.AgentRunID, MaxTextLen); err != nil {
		return err
	}
	if err := r.Consumed.Check(); err != nil {
		return fmt.Errorf("%w: run %q: %w", ErrInvalid, r.ID, err)
	}
	return nil
}
