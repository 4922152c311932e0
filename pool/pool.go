package pool

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/internal/ids"
)

// Status is the state of a pooled agent. Only non-terminal states are
// pooled: an agent that completes, fails or is cancelled leaves the pool.
type Status string

// The statuses of an [Entry].
const (
	StatusWaitingForInput    Status = "waiting_for_input"    // required fields are missing or invalid
	StatusWaitingForApproval Status = "waiting_for_approval" // complete; waits for the user's confirmation
)

// Defaults of the stores.
const (
	// DefaultMaxPerTenant is the number of live entries one tenant may hold.
	DefaultMaxPerTenant = 100
	// DefaultRetention is how long a store keeps an entry after its
	// ExpiresAt, so the orchestrator can still tell the user that the
	// action expired instead of forgetting it silently.
	DefaultRetention = time.Hour
)

// Entry is one agent waiting in the pool: for input, or for approval.
type Entry struct {
	ID             string `json:"id"`              // unique per tenant; also the approval request's ID
	AgentName      string `json:"agent_name"`      // the registered Agent-Tool (its type)
	TenantID       string `json:"tenant_id"`       // the owner; every lookup is by tenant
	ConversationID string `json:"conversation_id"` // where the agent was started
	Status         Status `json:"status"`
	Paused         bool   `json:"paused,omitempty"` // a paused entry is neither resumed nor decided
	// SchemaVersion is the fingerprint of the agent's schema when the entry
	// was made; an entry whose version no longer matches is never run.
	SchemaVersion string `json:"schema_version"`
	// Fields are the arguments collected so far, as a JSON object.
	Fields json.RawMessage `json:"fields,omitempty"`
	// Missing lists required fields not given yet; Problems the reasons
	// earlier values were rejected ("to: must be a valid email").
	Missing  []string `json:"missing,omitempty"`
	Problems []string `json:"problems,omitempty"`
	// State is the agent's own state between steps, opaque to the pool.
	State json.RawMessage `json:"state,omitempty"`
	// SubAgent is the loop state of the sub-agents the Agent-Tool was
	// called in, outermost first, so a decision resumes them where they
	// stopped; opaque to the pool; nil when the coordinator called it.
	SubAgent json.RawMessage `json:"sub_agent,omitempty"`
	// Approval is the pending request when Status is StatusWaitingForApproval.
	Approval *approval.Request `json:"approval,omitempty"`
	// ToolCallID is the model's tool call that started the agent.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// Source is approval.SourceUser or approval.SourceTrigger; TaskID and
	// Task identify the trigger task of a triggered run.
	Source string `json:"source,omitempty"`
	TaskID string `json:"task_id,omitempty"`
	Task   string `json:"task,omitempty"`
	// TraceParent is the W3C traceparent of the span of the run that made
	// the entry ("" without tracing): the run that later decides it, maybe
	// on another replica, links its spans to it.
	TraceParent string `json:"trace_parent,omitempty"`
	// Revision counts writes; Update succeeds only when it matches the
	// stored one (optimistic concurrency). Stores set it.
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// ExpiresAt is when the wait ends. The entry stays readable (Expired
	// reports true) for the store's retention after it, then disappears.
	ExpiresAt time.Time `json:"expires_at"`
}

// Expired reports whether the entry's wait has ended at now.
func (e *Entry) Expired(now time.Time) bool { return !now.Before(e.ExpiresAt) }

// Clone returns a deep copy of e.
func (e *Entry) Clone() *Entry {
	c := *e
	c.Fields = clone(e.Fields)
	c.State = clone(e.State)
	c.SubAgent = clone(e.SubAgent)
	c.Missing = append([]string(nil), e.Missing...)
	c.Problems = append([]string(nil), e.Problems...)
	if e.Approval != nil {
		a := *e.Approval
		if e.Approval.Details != nil {
			a.Details = make(map[string]any, len(e.Approval.Details))
			for k, v := range e.Approval.Details {
				a.Details[k] = v
			}
		}
		a.Options = append([]string(nil), e.Approval.Options...)
		c.Approval = &a
	}
	return &c
}

func clone(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// Store keeps pooled entries. Implementations are safe for concurrent use,
// also from several processes when the backend is shared; every method
// returns the sentinel errors below (wrapped) so callers use errors.Is.
//
// pool/pooltest.Run is the conformance suite every Store passes.
type Store interface {
	// Create adds a new entry. It needs ID, TenantID, AgentName, Status and
	// ExpiresAt (ErrInvalidEntry), fails with ErrExists when the tenant
	// already has that ID and with ErrTenantFull when the tenant holds its
	// cap of unexpired entries. It sets e.Revision to 1.
	Create(ctx context.Context, e *Entry) error
	// Update replaces an existing entry if its stored Revision equals
	// e.Revision (ErrConflict otherwise, ErrNotFound when it is gone), and
	// increments e.Revision.
	Update(ctx context.Context, e *Entry) error
	// Get returns the tenant's entry (expired ones too, until retention
	// ends) or ErrNotFound.
	Get(ctx context.Context, tenantID, id string) (*Entry, error)
	// List returns the tenant's entries, oldest first.
	List(ctx context.Context, tenantID string) ([]*Entry, error)
	// Take removes and returns the entry in one atomic step: of callers
	// racing for one entry, exactly one gets it and the others ErrNotFound.
	Take(ctx context.Context, tenantID, id string) (*Entry, error)
	// TakeRevision is Take on a condition: it removes and returns the
	// tenant's entry only if its stored Revision equals revision, in one
	// atomic step. It fails with ErrConflict, removing nothing, when the
	// entry was written since that revision, and with ErrNotFound when it
	// is gone. Like Take, of callers racing for one entry exactly one gets
	// it. Use it to act on the version of an entry a decision was made on
	// (the approval the user saw): an Update landing between the read and
	// the take makes the take fail instead of handing over an entry that
	// must then be put back.
	TakeRevision(ctx context.Context, tenantID, id string, revision int64) (*Entry, error)
	// Delete removes the entry, or returns ErrNotFound.
	Delete(ctx context.Context, tenantID, id string) error
}

// Locker serialises work on one key (a conversation) across goroutines
// and, for shared backends, across processes.
type Locker interface {
	// Lock blocks until the key is held or ctx ends, and returns the func
	// that releases it. Release is safe to call more than once.
	Lock(ctx context.Context, key string) (release func(), err error)
}

// Errors, checked with errors.Is.
var (
	ErrNotFound     = errors.New("pool: not found")
	ErrExists       = errors.New("pool: entry already exists")
	ErrConflict     = errors.New("pool: entry changed concurrently")
	ErrTenantFull   = errors.New("pool: tenant has too many pending agents")
	ErrInvalidEntry = errors.New("pool: invalid entry")
	// ErrInvalidConfig: a constructor refused its configuration (a nil
	// client, a negative or too small setting).
	ErrInvalidConfig = errors.New("pool: invalid config")
	// ErrCorrupt: a stored value could not be decoded. The store removes
	// it and reports it; it is never returned as an entry.
	ErrCorrupt = errors.New("pool: corrupt entry")
)

// MaxIDLen is the longest TenantID, ConversationID and TaskID an Entry may
// carry, in bytes: the one ID limit of every valet package
// (memory.MaxIDLen, trigger.MaxIDLen and agent.MaxIDLen are equal).
// Entry.Check refuses longer ones, and IDs that are not valid UTF-8 or
// hold a NUL byte.
const MaxIDLen = ids.MaxLen
