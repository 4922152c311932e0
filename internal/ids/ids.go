// Package ids holds the one rule every valet package applies to the
// tenant, conversation and task IDs it is given, so an ID one package
// accepts is accepted by all: a task whose IDs the trigger engine takes
// never fails in memory at its first run.
package ids

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxLen is the longest tenant, conversation or task ID, in bytes. The
// public packages export it under their own names (memory.MaxIDLen,
// trigger.MaxIDLen, agent.MaxIDLen, pool.MaxIDLen,
// credentials.MaxNameLen), all equal to it.
const MaxLen = 255

// Valid reports whether Check accepts id, without allocating.
func Valid(id string) bool {
	return id != "" && len(id) <= MaxLen && utf8.ValidString(id) && strings.IndexByte(id, 0) < 0
}

// Check reports what is wrong with id (what names it in the message:
// "tenant ID", "task ConversationID"): empty, longer than MaxLen bytes,
// not valid UTF-8 or holding a NUL byte. The error wraps no sentinel: each
// package wraps it into its own (memory.ErrInvalid, trigger.ErrInvalid…).
// The message does not repeat the id, which may be large or not text.
func Check(what, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty %s", what)
	case len(id) > MaxLen:
		return fmt.Errorf("%s is %d bytes, longer than %d", what, len(id), MaxLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("%s is not valid UTF-8", what)
	case strings.IndexByte(id, 0) >= 0:
		return fmt.Errorf("%s holds a NUL byte", what)
	}
	return nil
}
