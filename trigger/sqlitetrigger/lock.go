package sqlitetrigger

import (
	"context"
	"fmt"
)

// lockSuffix is appended to the database file's path to name the file
// Dispatch locks.
const lockSuffix = "-valet-trigger.lock"

// lockDispatch takes the dispatch lock of the file the Store works on,
// returning the function that lets it go, or an error wrapping
// ErrDispatching when another process (or another Store) holds it. A
// database with no file (in memory) needs no lock: no other process can
// open it.
func (s *Store) lockDispatch(ctx context.Context) (func(), error) {
	var path string
	if err := s.db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		return nil, s.fail(ctx, "dispatch", fmt.Errorf("reading the database's file name: %w", err))
	}
	if path == "" {
		return func() {}, nil
	}
	return lockFile(path + lockSuffix)
}
