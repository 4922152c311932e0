package approval

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Action is what the user decided about one approval request.
type Action string

// The actions of a [Decision].
const (
	Approve Action = "approve" // run the action as presented
	Edit    Action = "edit"    // run it with the changed fields in Decision.Fields
	Cancel  Action = "cancel"  // do not run it
)

// Valid reports whether a is one of Approve, Edit and Cancel.
func (a Action) Valid() bool { return a == Approve || a == Edit || a == Cancel }

// Sources of a [Request].
const (
	SourceUser    = "user"    // raised while handling a user's message
	SourceTrigger = "trigger" // raised by a triggered (proactive) run
)

// Request asks the user to confirm one action before it runs.
type Request struct {
	ID            string         `json:"id"`             // unique; the pool entry's ID
	AgentName     string         `json:"agent_name"`     // the Agent-Tool that asks
	ActionSummary string         `json:"action_summary"` // one line: "Send an email to team@example.com"
	Details       map[string]any `json:"details,omitempty"`
	// Options the user may choose from: "approve", "edit", "cancel".
	Options           []string  `json:"options,omitempty"`
	AllowModification bool      `json:"allow_modification"` // whether Edit is accepted
	TenantID          string    `json:"tenant_id"`
	ConversationID    string    `json:"conversation_id"`
	Source            string    `json:"source,omitempty"`  // SourceUser or SourceTrigger
	TaskID            string    `json:"task_id,omitempty"` // the trigger task, when Source is SourceTrigger
	CreatedAt         time.Time `json:"created_at"`
	ExpiresAt         time.Time `json:"expires_at"`
}

// Expired reports whether the request can no longer be decided at now.
func (r *Request) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// Decision is the user's answer to one request.
type Decision struct {
	Action Action
	// Fields holds, for Edit, the changed fields as a JSON object; they are
	// merged into the action's arguments and validated again.
	Fields json.RawMessage
	// Reason is optional free text (why the user cancelled, say).
	Reason string
}

// Check reports whether d is well formed: a known action, and for Edit a
// JSON object of fields. It wraps ErrInvalidDecision.
func (d Decision) Check() error {
	if !d.Action.Valid() {
		return fmt.Errorf("%w: unknown action %q (want approve, edit or cancel)", ErrInvalidDecision, d.Action)
	}
	if d.Action == Edit {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(d.Fields, &m); err != nil || m == nil {
			return fmt.Errorf("%w: edit needs Fields as a JSON object of the changed fields", ErrInvalidDecision)
		}
	}
	return nil
}

// Errors, checked with errors.Is.
var (
	// ErrNotFound: no pending request has that ID for that tenant (it never
	// existed, belongs to another tenant, or was already decided).
	ErrNotFound = errors.New("approval: not found")
	// ErrExpired: the request's ExpiresAt has passed; nothing ran.
	ErrExpired = errors.New("approval: expired")
	// ErrInvalidDecision: a Decision that is not well formed.
	ErrInvalidDecision = errors.New("approval: invalid decision")
	// ErrNotAllowed: an Edit of a request that does not allow modification.
	ErrNotAllowed = errors.New("approval: modification not allowed")
)
