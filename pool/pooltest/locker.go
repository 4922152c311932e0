package pooltest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/pool"
)

// RunLocker checks that the lockers newLocker makes behave as
// [pool.Locker] documents. Each check is a parallel subtest with a locker
// of its own; a locker that polls should poll often (every few
// milliseconds) to keep the suite fast.
func RunLocker(t *testing.T, newLocker NewLocker) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, newLocker NewLocker)
	}{
		{"MutualExclusion", testExclusion},
		{"KeysIndependent", testKeys},
		{"WaiterGetsLock", testWaiter},
		{"CancelWhileWaiting", testCancelWaiting},
		{"EndedContext", testEndedContext},
		{"ReleaseIdempotent", testReleaseTwice},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newLocker)
		})
	}
}

// guard is how long past its context's end a Lock, or a release, may
// take before the suite calls it stuck.
const guard = 5 * time.Second

// lockGuarded calls l.Lock and fails the test if it does not return
// within guard after ctx ends (a Lock that ignores its context).
func lockGuarded(t *testing.T, ctx context.Context, l pool.Locker, key string) (func(), error) {
	t.Helper()
	type result struct {
		release func()
		err     error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Lock(ctx, key)
		done <- result{r, err}
	}()
	select {
	case res := <-done:
		return res.release, res.err
	case <-ctx.Done():
	}
	select {
	case res := <-done:
		return res.release, res.err
	case <-time.After(guard):
		t.Fatalf("Lock(%q) still waiting %v after its context ended", key, guard)
		return nil, nil
	}
}

// unlock calls release and fails the test if it blocks.
func unlock(t *testing.T, release func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		release()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(guard):
		t.Fatalf("release blocked for %v", guard)
	}
}

// lockWithin locks key, failing the test if that takes longer than d.
func lockWithin(t *testing.T, l pool.Locker, key string, d time.Duration) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	release, err := lockGuarded(t, ctx, l, key)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	if release == nil {
		t.Fatalf("Lock(%q) returned a nil release and no error", key)
	}
	return func() { unlock(t, release) }
}

// wantBlocked checks that key cannot be locked within d.
func wantBlocked(t *testing.T, l pool.Locker, key string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	release, err := lockGuarded(t, ctx, l, key)
	if err == nil {
		unlock(t, release)
		t.Errorf("Lock(%q) succeeded while another holder has it", key)
		return
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock(%q) with an ending context: %v, want context.DeadlineExceeded", key, err)
	}
}

func testExclusion(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	const workers, rounds = 6, 5
	var inside, overlaps atomic.Int32
	count := 0 // guarded by the lock only: the race detector sees a broken one
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				release, err := l.Lock(ctx, "shared")
				cancel()
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				count++
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				release()
			}
		})
	}
	wg.Wait()
	if overlaps.Load() > 0 {
		t.Errorf("%d times two goroutines held the same key at once", overlaps.Load())
	}
	if count != workers*rounds {
		t.Errorf("count = %d, want %d", count, workers*rounds)
	}
}

func testKeys(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	ra := lockWithin(t, l, "key-a", 5*time.Second)
	defer ra()
	rb := lockWithin(t, l, "key-b", 2*time.Second) // a held key does not block another
	defer rb()
	wantBlocked(t, l, "key-a", 100*time.Millisecond)
	wantBlocked(t, l, "key-b", 100*time.Millisecond)
}

func testWaiter(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	release := lockWithin(t, l, "k", 5*time.Second)
	got := make(chan error, 1)
	var holding atomic.Bool
	holding.Store(true)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := l.Lock(ctx, "k")
		if err == nil {
			if holding.Load() {
				err = errors.New("waiter got the key while the first holder still had it")
			}
			r()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	holding.Store(false)
	release()
	if err := <-got; err != nil {
		t.Errorf("waiter: %v", err)
	}
}

func testCancelWaiting(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	release := lockWithin(t, l, "k", 5*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		r, err := l.Lock(ctx, "k")
		if err == nil {
			r()
		}
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		wantErr(t, "Lock cancelled while waiting", err, context.Canceled)
	case <-time.After(guard):
		t.Fatalf("Lock still waiting %v after its context was cancelled", guard)
	}
	wantBlocked(t, l, "k", 50*time.Millisecond)

	// The cancelled waiter took nothing: after release the key is free.
	release()
	lockWithin(t, l, "k", 2*time.Second)()
}

func testEndedContext(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release, err := lockGuarded(t, ctx, l, "free")
	if err == nil {
		unlock(t, release)
	}
	wantErr(t, "Lock of a free key with a cancelled context", err, context.Canceled)
	lockWithin(t, l, "free", 2*time.Second)() // and it took nothing
}

func testReleaseTwice(t *testing.T, newLocker NewLocker) {
	l := newLocker(t)
	first := lockWithin(t, l, "k", 2*time.Second)
	first()
	first()
	second := lockWithin(t, l, "k", 2*time.Second)
	first() // a late release must not free the second holder's lock
	wantBlocked(t, l, "k", 150*time.Millisecond)
	second()
	second()
	lockWithin(t, l, "k", 2*time.Second)()
}
