package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
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
	// Fingerprint identifies exactly the action shown: a hash of the agent,
	// its schema version and its arguments (see [Fingerprint]). It changes
	// when the draft is edited, not when the request is paused or resumed.
	// A UI sends it back in Decision.Fingerprint so a decision taken on a
	// stale screen fails with ErrStale instead of running another action.
	Fingerprint string `json:"fingerprint,omitempty"`
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
	// Fingerprint, when set, is the Request.Fingerprint the user saw. If the
	// action has changed since (its arguments were edited), the decision
	// fails with ErrStale and nothing runs. Empty means "whatever is
	// pending now".
	Fingerprint string
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
	// ErrStale: the decision carried a Fingerprint that no longer matches
	// the pending action (it was edited after the user saw it); nothing
	// ran and the request stays pending.
	ErrStale = errors.New("approval: the action changed since it was shown")
)

// Fingerprint returns the fingerprint of an action: a hash of the agent's
// name, its schema version and its arguments in canonical form (object
// keys sorted, insignificant white space removed), so equal arguments
// written differently give the same fingerprint. Arguments that are not
// valid JSON are hashed as they are. The result is 32 hex digits.
func Fingerprint(agentName, schemaVersion string, args json.RawMessage) string {
	h := sha256.New()
	var n [8]byte
	for _, part := range [][]byte{[]byte(agentName), []byte(schemaVersion), canonicalJSON(args)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(part))) // length-prefixed: "a"+"bc" differs from "ab"+"c"
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// canonicalJSON re-encodes a JSON value with sorted keys and numbers kept
// as written; it returns b itself when b is not valid JSON.
func canonicalJSON(b json.RawMessage) []byte {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
