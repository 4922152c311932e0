package redispool

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/pool"
)

// Defaults of [LockerOptions].
const (
	// DefaultLease is how long a lock outlives a holder that stopped
	// renewing it (a crashed process).
	DefaultLease = 30 * time.Second
	// DefaultRetryDelay is how often a waiting Lock tries again.
	DefaultRetryDelay = 20 * time.Millisecond
)

// releaseTimeout bounds the call that deletes a lock on release, which
// has no context of its own.
const releaseTimeout = 5 * time.Second

// LockerOptions configures [NewLocker]. The zero value means the
// defaults.
type LockerOptions struct {
	// Prefix starts every key; "" means DefaultPrefix. Lock keys are
	// prefix + "lock:" + key.
	Prefix string
	// Lease is how long a lock lasts unless renewed; its holder renews it
	// every Lease/3 until release. 0 means DefaultLease.
	Lease time.Duration
	// RetryDelay is how often a waiting Lock tries again; 0 means
	// DefaultRetryDelay.
	RetryDelay time.Duration
	// Logger reports failed renewals and releases; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Locker is a [pool.Locker] on Redis: it serialises work on a key across
// the processes that share a prefix. A held lock is renewed in the
// background; if its holder dies, the lock ends after the lease.
type Locker struct {
	rdb    *redis.Client
	prefix string
	lease  time.Duration
	retry  time.Duration
	log    *slog.Logger

	renew, unlock *redis.Script
}

var _ pool.Locker = (*Locker)(nil)

const (
	// KEYS[1] the lock; ARGV: token, lease in ms.
	renewScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`

	// KEYS[1] the lock; ARGV: token.
	unlockScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`
)

// NewLocker returns a Locker on rdb, a client the caller configured and
// closes.
func NewLocker(rdb *redis.Client, opts LockerOptions) (*Locker, error) {
	if rdb == nil {
		return nil, errors.New("redispool: NewLocker needs a *redis.Client, got nil")
	}
	if opts.Lease < 0 || opts.RetryDelay < 0 {
		return nil, fmt.Errorf("redispool: negative Lease %v or RetryDelay %v", opts.Lease, opts.RetryDelay)
	}
	l := &Locker{
		rdb:    rdb,
		prefix: cmp.Or(opts.Prefix, DefaultPrefix),
		lease:  cmp.Or(opts.Lease, DefaultLease),
		retry:  cmp.Or(opts.RetryDelay, DefaultRetryDelay),
		log:    cmp.Or(opts.Logger, slog.Default()),
		renew:  redis.NewScript(renewScript),
		unlock: redis.NewScript(unlockScript),
	}
	if l.lease < 3*time.Millisecond {
		return nil, fmt.Errorf("redispool: Lease %v is under 3ms", l.lease)
	}
	return l, nil
}

// Lock blocks until key is held or ctx ends (then it returns ctx.Err()).
// The lock is renewed until release, which is safe to call more than once
// and waits for the renewal to stop.
func (l *Locker) Lock(ctx context.Context, key string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	k := l.prefix + "lock:" + key
	token := rand.Text()
	var timer *time.Timer
	for {
		ok, err := l.rdb.SetNX(ctx, k, token, l.lease).Result()
		if ctx.Err() != nil {
			if ok { // got it just as ctx ended: give it back
				l.release(k, token)
			}
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("redispool: lock %q: %w", key, err)
		}
		if ok {
			break
		}
		if timer == nil {
			timer = time.NewTimer(l.retry)
			defer timer.Stop()
		} else {
			timer.Reset(l.retry)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
	}

	stop, done := make(chan struct{}), make(chan struct{})
	go l.keep(k, token, stop, done)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			l.release(k, token)
		})
	}, nil
}

// keep renews the lock every lease/3 until stop closes or the lock is
// lost, then closes done.
func (l *Locker) keep(k, token string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	every := l.lease / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		n, err := l.renew.Run(ctx, l.rdb, []string{k}, token, l.lease.Milliseconds()).Int()
		cancel()
		switch {
		case err != nil:
			l.log.Warn("redispool: renewing a lock failed; will retry", "key", k, "err", err)
		case n == 0:
			l.log.Error("redispool: lock lost: its lease ended before renewal", "key", k)
			return
		}
	}
}

// release deletes the lock if it is still token's.
func (l *Locker) release(k, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := l.unlock.Run(ctx, l.rdb, []string{k}, token).Err(); err != nil {
		l.log.Warn("redispool: releasing a lock failed; it ends with its lease", "key", k, "err", err)
	}
}
