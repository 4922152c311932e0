package pool

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/valetkit/valet/internal/ids"
)

// Valid reports whether s is one of the statuses an entry may have in the
// pool.
func (s Status) Valid() bool {
	return s == StatusWaitingForInput || s == StatusWaitingForApproval
}

// Check reports whether e can be stored: it needs ID, TenantID, AgentName,
// a valid Status and a non-zero ExpiresAt; ID must be valid UTF-8 (an
// entry's JSON could not carry it back unchanged); TenantID, and ConversationID
// and TaskID when set, must be valid UTF-8 without NUL of at most MaxIDLen
// bytes; Fields, State and SubAgent, when set, must be valid JSON. The error wraps
// ErrInvalidEntry
// and names the first problem. Stores call it in Create and Update.
func (e *Entry) Check() error {
	switch {
	case e == nil:
		return fmt.Errorf("%w: nil entry", ErrInvalidEntry)
	case e.ID == "":
		return fmt.Errorf("%w: empty ID", ErrInvalidEntry)
	case !utf8.ValidString(e.ID):
		return fmt.Errorf("%w: ID %q is not valid UTF-8", ErrInvalidEntry, e.ID)
	case e.TenantID == "":
		return fmt.Errorf("%w: empty TenantID (entry %q)", ErrInvalidEntry, e.ID)
	case ids.Check("TenantID", e.TenantID) != nil:
		return fmt.Errorf("%w: %v (entry %q)", ErrInvalidEntry, ids.Check("TenantID", e.TenantID), e.ID)
	case e.ConversationID != "" && ids.Check("ConversationID", e.ConversationID) != nil:
		return fmt.Errorf("%w: %v (entry %q)", ErrInvalidEntry, ids.Check("ConversationID", e.ConversationID), e.ID)
	case e.TaskID != "" && ids.Check("TaskID", e.TaskID) != nil:
		return fmt.Errorf("%w: %v (entry %q)", ErrInvalidEntry, ids.Check("TaskID", e.TaskID), e.ID)
	case e.AgentName == "":
		return fmt.Errorf("%w: empty AgentName (entry %q)", ErrInvalidEntry, e.ID)
	case !e.Status.Valid():
		return fmt.Errorf("%w: status %q (want %q or %q) (entry %q)",
			ErrInvalidEntry, e.Status, StatusWaitingForInput, StatusWaitingForApproval, e.ID)
	case e.ExpiresAt.IsZero():
		return fmt.Errorf("%w: zero ExpiresAt (entry %q)", ErrInvalidEntry, e.ID)
	case len(e.Fields) > 0 && !json.Valid(e.Fields):
		return fmt.Errorf("%w: Fields is not valid JSON (entry %q)", ErrInvalidEntry, e.ID)
	case len(e.State) > 0 && !json.Valid(e.State):
		return fmt.Errorf("%w: State is not valid JSON (entry %q)", ErrInvalidEntry, e.ID)
	case len(e.SubAgent) > 0 && !json.Valid(e.SubAgent):
		return fmt.Errorf("%w: SubAgent is not valid JSON (entry %q)", ErrInvalidEntry, e.ID)
	}
	return nil
}
