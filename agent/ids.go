package agent

import (
	"errors"
	"fmt"

	"github.com/valetkit/valet/internal/ids"
)

// MaxIDLen is the longest tenant, conversation or task ID the
// orchestrator takes, in bytes: the one ID limit of every valet package
// (memory.MaxIDLen, trigger.MaxIDLen, pool.MaxIDLen and
// credentials.MaxNameLen are equal), so an ID accepted here is accepted
// by the memory provider, the pool and the trigger engine.
const MaxIDLen = ids.MaxLen

// ErrInvalidID: a tenant, conversation or task ID longer than MaxIDLen
// bytes, not valid UTF-8 or holding a NUL byte. Nothing ran. An empty
// TenantID is ErrNoTenant; an empty ConversationID names
// DefaultConversationID.
var ErrInvalidID = errors.New("agent: invalid ID")

// checkTenant checks a tenant ID: ErrNoTenant when empty, ErrInvalidID
// when malformed.
func checkTenant(tenantID string) error {
	if tenantID == "" {
		return ErrNoTenant
	}
	return checkID("tenant ID", tenantID)
}

// checkConversation checks a tenant ID and a conversation ID, "" meaning
// DefaultConversationID.
func checkConversation(tenantID, conversationID string) error {
	if err := checkTenant(tenantID); err != nil {
		return err
	}
	return checkID("conversation ID", conversationOf(conversationID))
}

// checkMessage checks the IDs of a message: its tenant, its conversation
// and, when set, its task.
func checkMessage(m *Message) error {
	if err := checkConversation(m.TenantID, m.ConversationID); err != nil {
		return err
	}
	if m.TaskID != "" {
		return checkID("task ID", m.TaskID)
	}
	return nil
}

func checkID(what, id string) error {
	if ids.Valid(id) {
		return nil
	}
	return fmt.Errorf("%w: %v", ErrInvalidID, ids.Check(what, id))
}
