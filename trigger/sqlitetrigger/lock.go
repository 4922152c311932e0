package sqlitetrigger

import (
	"context"
	"fmt"
	"time"
)

// lockSuffix and migrateLockSuffix are appended to the database file's
// path to name the files Dispatch and Migrate lock.
const (
	lockSuffix        = "-valet-trigger.lock"
	migrateLockSuffix = "-valet-trigger-migrate.lock"
)

// lockPoll is how often Migrate tries again for the migrate lock.
const lockPoll = 50 * time.Millisecond

// lockDispatch takes the dispatch lock of the file the Store works on,
// returning the function that lets it go, or an error wrapping
// ErrDispatching when another process (or another Store) holds it. A
// database with no file (in memory) needs no lock: no other process can
// open it.
func (s *Store) lockDispatch(ctx context.Context) (func(), error) {
	path, err := s.dbFile(ctx)
	if err != nil || path == "" {
		return func() {}, s.fail(ctx, "dispatch", err)
	}
	return lockFile(path + lockSuffix)
}

// lockMigrate takes the migrate lock of the file, waiting while another
// process (or Store) migrates, so that processes starting together on a
// new file migrate one after the other: River's migrations, one
// transaction each, would otherwise meet half-way.
func (s *Store) lockMigrate(ctx context.Context) (func(), error) {
	path, err := s.dbFile(ctx)
	if err != nil || path == "" {
		return func() {}, err
	}
	return lockFileWait(ctx, path+migrateLockSuffix)
}

// dbFile returns the path of the database's main file, "" for one in
// memory.
func (s *Store) dbFile(ctx context.Context) (string, error) {
	var path string
	if err := s.db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&path); err != nil {
		return "", fmt.Errorf("reading the database's file name: %w", err)
	}
	return path, nil
}
