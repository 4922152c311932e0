package sqlitex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
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

// busyRetryFor bounds how long RetryBusy tries again.
const busyRetryFor = 15 * time.Second

// RetryBusy runs fn, and runs it again while it fails with SQLITE_BUSY,
// for at most busyRetryFor (and until ctx ends), waiting a little longer
// each time. SQLite returns SQLITE_BUSY at once, without waiting its busy
// timeout, where waiting could deadlock or where it cannot wait: a
// connection's first open setting the WAL journal of a new file while
// another connection sets it, and a deferred transaction (River's
// migrations) whose read snapshot another connection's write made stale.
// fn must be safe to run again: each of its writes in a transaction that
// either committed or rolled back (a migration that reads its version
// first is).
func RetryBusy(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(busyRetryFor)
	wait := 10 * time.Millisecond
	for {
		err := fn()
		if Code(err) != codeBusy || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, 250*time.Millisecond)
	}
}
