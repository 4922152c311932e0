//go:build unix

package sqlitetrigger

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockFileWait takes an exclusive flock(2) on the file at path, creating
// it, waiting (trying again every lockPoll) while another holds it, until
// ctx ends.
func lockFileWait(ctx context.Context, path string) (func(), error) {
	for {
		unlock, err := lockFile(path)
		if !errors.Is(err, ErrDispatching) {
			return unlock, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}

// lockFile takes an exclusive flock(2) on the file at path, creating it.
// The kernel lets the lock go when the process ends, killed too, so a
// restarted process takes it at once.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlitetrigger: dispatch: opening the lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s is locked); run one engine per file", ErrDispatching, path)
		}
		return nil, fmt.Errorf("sqlitetrigger: dispatch: locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
