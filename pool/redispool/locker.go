package redispool

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/pool"
)

// Defaults of a zero [LockerConfig].
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

// LockerConfig configures [NewLocker]. The zero value means the
// documented defaults.
type LockerConfig struct {
	// Lease is how long a lock lasts unless renewed; its holder renews it
	// every Lease/3 until release. At least 3ms.
	// Default: DefaultLease (30s).
	Lease time.Duration
	// Logger reports failed renewals and releases.
	// Default: slog.Default().
	Logger *slog.Logger
	// Prefix starts every key: lock keys are Prefix + "lock:" + key.
	// Lockers that share a prefix (and a Redis) share their locks.
	// Default: DefaultPrefix ("valet:").
	Prefix string
	// RetryDelay is how often a waiting Lock tries again. Negative is an
	// error. Default: DefaultRetryDelay (20ms).
	RetryDelay time.Duration
}

// withDefaults returns c with its defaults filled in, or an error wrapping
// pool.ErrInvalidConfig naming the field it rejects.
func (c LockerConfig) withDefaults() (LockerConfig, error) {
	if c.Lease < 0 || (c.Lease > 0 && c.Lease < 3*time.Millisecond) {
		return c, fmt.Errorf("redispool: %w: Lease %v is under 3ms", pool.ErrInvalidConfig, c.Lease)
	}
	if c.RetryDelay < 0 {
		return c, fmt.Errorf("redispool: %w: negative RetryDelay %v", pool.ErrInvalidConfig, c.RetryDelay)
	}
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.RetryDelay = cmp.Or(c.RetryDelay, DefaultRetryDelay)
	return c, nil
}

// Locker is a [pool.Locker] on Redis: it serialises work on a key across
// the processes that share a prefix. A held lock is renewed in the
// background; if its holder dies, the lock ends after the lease.
type Locker struct {
	rdb    redis.UniversalClient
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
// closes: a *redis.Client, *redis.ClusterClient or a failover client. The
// zero LockerConfig means the defaults. A nil rdb or a setting out of
// range is an error wrapping pool.ErrInvalidConfig.
func NewLocker(rdb redis.UniversalClient, cfg LockerConfig) (*Locker, error) {
	if rdb == nil {
		return nil, fmt.Errorf("redispool: %w: NewLocker needs a redis.UniversalClient, got nil", pool.ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Locker{
		rdb:    rdb,
		prefix: cfg.Prefix,
		lease:  cfg.Lease,
		retry:  cfg.RetryDelay,
		log:    cfg.Logger,
		renew:  redis.NewScript(renewScript),
		unlock: redis.NewScript(unlockScript),
	}, nil
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
