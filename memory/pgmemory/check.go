package pgmemory

import (
	"strings"
	"unicode/utf8"

	"github.com/valetkit/valet/memory"
)

// checkConv checks the IDs naming a conversation.
func checkConv(tenantID, conversationID string) error {
	if err := memory.CheckID("tenant", tenantID); err != nil {
		return err
	}
	return memory.CheckID("conversation", conversationID)
}

// storable reports whether PostgreSQL text can hold s.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
