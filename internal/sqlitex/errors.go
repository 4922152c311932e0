package sqlitex

import (
	"errors"
	"fmt"
	"strings"
)

// Primary result codes of SQLite (the low byte of an extended code).
const (
	codeBusy     = 5
	codeReadOnly = 8
	codeCorrupt  = 11
	codeFull     = 13
	codeCantOpen = 14
	codeNotADB   = 26
)

// coder is modernc.org/sqlite's *Error, matched by its method so that this
// package needs no driver.
type coder interface{ Code() int }

// Code returns the primary SQLite result code of err, or 0 when err holds
// none.
func Code(err error) int {
	var c coder
	if errors.As(err, &c) {
		return c.Code() & 0xff
	}
	return 0
}

// Explain adds to an error from SQLite what a user should do about it: a
// missing table means Migrate has not run, a file that is not a database
// or is damaged is named so, a read-only file or directory, a full disk,
// and a lock another connection held (past the busy timeout, or at
// once where waiting could deadlock). Other errors come back as they
// are.
func Explain(err error) error {
	if err == nil {
		return nil
	}
	var hint string
	switch Code(err) {
	case codeNotADB:
		hint = "the file is not an SQLite database"
	case codeCorrupt:
		hint = "the database file is damaged"
	case codeReadOnly:
		hint = "the database is read-only (the file's or its directory's permissions, or opened with mode=ro)"
	case codeCantOpen:
		hint = "the database file cannot be opened (a missing directory, or permissions)"
	case codeFull:
		hint = "the disk is full; nothing of this call was written"
	case codeBusy:
		// SQLite answers BUSY after the busy timeout, but also at once to
		// a transaction that began by reading and then tries to write
		// while another connection writes: waiting could deadlock.
		hint = "another connection held the database's lock: past the busy timeout, or at once for a transaction that read before writing, where waiting could deadlock"
	default:
		if strings.Contains(err.Error(), "no such table") {
			hint = "run Migrate first"
		}
	}
	if hint == "" {
		return err
	}
	return fmt.Errorf("%w (%s)", err, hint)
}
