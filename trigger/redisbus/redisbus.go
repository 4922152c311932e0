package redisbus

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/trigger"
)

// Defaults of a zero Config.
const (
	// DefaultPrefix starts the stream's key, as it starts every key of
	// pool/redispool.
	DefaultPrefix = "valet:"
	// DefaultStream is the stream events are added to when Config sets
	// neither Stream, Prefix nor Namespace: StreamFor("", ""). With a
	// Namespace it is "valet:" + Namespace + ":events".
	DefaultStream = DefaultPrefix + "events"
	// DefaultGroup is the consumer group that reads them.
	DefaultGroup = "valet-engine"
	// DefaultMaxLen is about how many entries the stream keeps.
	DefaultMaxLen = 100_000
	// DefaultClaimIdle is how long an entry stays pending, unacknowledged,
	// before another consumer may take it.
	DefaultClaimIdle = time.Minute
	// DefaultBlock is how long one XREADGROUP waits for new entries.
	DefaultBlock = 2 * time.Second
	// DefaultCount is how many entries one XREADGROUP or XAUTOCLAIM
	// takes at most.
	DefaultCount = 10
	// DefaultMaxDeliveries is how many times an entry is delivered
	// before it goes to the dead stream.
	DefaultMaxDeliveries = trigger.DefaultMaxDeliveries
)

// Retries of Subscribe while Redis fails: the first after MinBackoff,
// each next one twice as late, at most MaxBackoff.
const (
	MinBackoff = 100 * time.Millisecond
	MaxBackoff = 5 * time.Second
)

// DeadSuffix makes the name of the dead stream from the stream's.
const DeadSuffix = ":dead"

// field is the one field of an entry: the event as JSON.
const field = "event"

// Config configures a Bus. The zero value means the documented defaults.
type Config struct {
	// Block is how long one XREADGROUP waits for new entries, and so
	// about how long Subscribe may take to return after its ctx ends
	// (go-redis does not interrupt a blocked read unless the client sets
	// ContextTimeoutEnabled). At least a millisecond.
	// Default: DefaultBlock (2s).
	Block time.Duration
	// ClaimIdle is how long an entry stays pending before a consumer
	// takes it with XAUTOCLAIM: the entry of a consumer that died, or
	// whose handler failed. It must exceed the longest time a handler
	// takes, or a slow handler's entry is delivered twice. At least a
	// millisecond. Default: DefaultClaimIdle (1m).
	ClaimIdle time.Duration
	// Consumer names this Bus in the group. Two live Buses must not share
	// a name. Default: the host name, the process id and a random suffix,
	// unique per Bus.
	Consumer string
	// Count is how many entries one read or claim takes at most.
	// Default: DefaultCount (10).
	Count int64
	// Group is the consumer group. Buses with the same Stream and Group
	// share the events: each goes to one of them.
	// Default: DefaultGroup ("valet-engine").
	Group string
	// Logger logs what Subscribe cannot return: Redis errors it retries,
	// failed handlers, dead entries. Default: slog.Default().
	Logger *slog.Logger
	// MaxDeliveries is how many times an entry is delivered; when its
	// last delivery fails, or an entry is claimed after it, it is
	// acknowledged, logged and copied to the dead stream.
	// Default: DefaultMaxDeliveries.
	MaxDeliveries int64
	// MaxLen is about how many entries the stream keeps: XADD trims it
	// with MAXLEN ~, dropping the oldest entries first, acknowledged or
	// not. Size it well above the backlog you expect. The dead stream is
	// trimmed the same way. Default: DefaultMaxLen (100,000).
	MaxLen int64
	// Namespace names the deployment whose events the bus carries: give
	// it the Store's (rivertrigger.Store.Namespace, its PostgreSQL
	// database and schema), and the stream is named from it, so two
	// environments sharing a Redis never read each other's events.
	// trigger.New refuses a Bus and a Store whose namespaces differ
	// (trigger.Namespaced), the default "" included. Default: "", none.
	Namespace string
	// Prefix starts the stream's key when Stream is "": the stream is
	// Prefix + Namespace + ":events" (StreamFor), the same notion as
	// pool/redispool's Config.Prefix, so one prefix per environment keeps
	// all of valet's keys in a Redis apart. Default: DefaultPrefix
	// ("valet:").
	Prefix string
	// Stream is the stream's key; setting it chooses the stream apart
	// from Prefix and Namespace: keep it unique per deployment. Its dead
	// entries go to Stream + DeadSuffix. Default: StreamFor(Prefix,
	// Namespace), "valet:" + Namespace + ":events", or DefaultStream
	// ("valet:events") when Namespace is "" too.
	Stream string
}

// withDefaults returns c with its defaults filled in, or an error
// wrapping trigger.ErrInvalid naming the field it rejects.
func (c Config) withDefaults() (Config, error) {
	switch {
	case c.MaxLen < 0:
		return c, fmt.Errorf("%w: redisbus: negative MaxLen %d", trigger.ErrInvalid, c.MaxLen)
	case c.ClaimIdle < 0 || (c.ClaimIdle > 0 && c.ClaimIdle < time.Millisecond):
		return c, fmt.Errorf("%w: redisbus: ClaimIdle %v is under a millisecond", trigger.ErrInvalid, c.ClaimIdle)
	case c.Block < 0 || (c.Block > 0 && c.Block < time.Millisecond):
		return c, fmt.Errorf("%w: redisbus: Block %v is under a millisecond", trigger.ErrInvalid, c.Block)
	case c.Count < 0:
		return c, fmt.Errorf("%w: redisbus: negative Count %d", trigger.ErrInvalid, c.Count)
	case c.MaxDeliveries < 0:
		return c, fmt.Errorf("%w: redisbus: negative MaxDeliveries %d", trigger.ErrInvalid, c.MaxDeliveries)
	}
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.Stream = cmp.Or(c.Stream, StreamFor(c.Prefix, c.Namespace))
	c.Group = cmp.Or(c.Group, DefaultGroup)
	if c.Consumer == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "host"
		}
		c.Consumer = host + "-" + strconv.Itoa(os.Getpid()) + "-" + rand.Text()[:8]
	}
	c.MaxLen = cmp.Or(c.MaxLen, DefaultMaxLen)
	c.ClaimIdle = cmp.Or(c.ClaimIdle, DefaultClaimIdle)
	c.Block = cmp.Or(c.Block, DefaultBlock)
	c.Count = cmp.Or(c.Count, DefaultCount)
	c.MaxDeliveries = cmp.Or(c.MaxDeliveries, DefaultMaxDeliveries)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c, nil
}

// Bus is a trigger.EventBus on a Redis stream read by a consumer group.
// It is safe for concurrent use.
type Bus struct {
	rdb  redis.UniversalClient
	cfg  Config // with the defaults filled in
	dead string
	log  *slog.Logger

	mu     sync.Mutex // held while the consumer is removed
	active int        // Subscribe calls under way
}

var (
	_ trigger.EventBus   = (*Bus)(nil)
	_ trigger.Namespaced = (*Bus)(nil)
)

// New returns a Bus on rdb, a client the caller configured and closes
// (any redis.UniversalClient), configured by cfg; the zero Config means
// the defaults. It sends nothing to Redis yet. Requires Redis 6.2 or
// later.
func New(rdb redis.UniversalClient, cfg Config) (*Bus, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: redisbus: New needs a redis.UniversalClient, got nil", trigger.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.With("stream", cfg.Stream, "group", cfg.Group, "consumer", cfg.Consumer)
	cfg.Logger = nil
	return &Bus{rdb: rdb, cfg: cfg, dead: cfg.Stream + DeadSuffix, log: log}, nil
}

// StreamFor returns the default stream of a Bus with key prefix prefix
// ("" means DefaultPrefix) in namespace ns: prefix + ns + ":events", or
// prefix + "events" when ns is "" (DefaultStream with the default
// prefix).
func StreamFor(prefix, ns string) string {
	prefix = cmp.Or(prefix, DefaultPrefix)
	if ns == "" {
		return prefix + "events"
	}
	return prefix + ns + ":events"
}

// Namespace implements trigger.Namespaced: Config.Namespace.
func (b *Bus) Namespace() string { return b.cfg.Namespace }

// Stream returns the key of the stream events are added to.
func (b *Bus) Stream() string { return b.cfg.Stream }

// Consumer returns the Bus's name in the consumer group.
func (b *Bus) Consumer() string { return b.cfg.Consumer }

// DeadStream returns the key of the stream dead entries are copied to.
func (b *Bus) DeadStream() string { return b.dead }

// Publish implements [trigger.EventBus.Publish]: it checks ev (errors
// wrap trigger.ErrInvalid, as for an event whose Data cannot be encoded
// as JSON or is over trigger.MaxEventSize encoded), then adds it to the
// stream with XADD, trimming the stream to about MaxLen entries. It
// returns once Redis has stored it; an error from Redis is wrapped.
func (b *Bus) Publish(ctx context.Context, ev trigger.Event) error {
	payload, err := trigger.EncodeEvent(ev)
	if err != nil {
		return fmt.Errorf("redisbus: publish: %w", err)
	}
	err = b.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: b.cfg.Stream,
		MaxLen: b.cfg.MaxLen,
		Approx: true,
		Values: []any{field, payload},
	}).Err()
	if err != nil {
		return fmt.Errorf("redisbus: publish event %q to %q: %w", ev.ID, b.cfg.Stream, err)
	}
	return nil
}

// Subscribe implements [trigger.EventBus.Subscribe]. It creates the
// consumer group if it does not exist (from the stream's first entry),
// then loops until ctx ends: every ClaimIdle/2 it takes the entries
// pending longer than ClaimIdle with XAUTOCLAIM, and in between it reads
// new entries with XREADGROUP, handing each to h in turn and
// acknowledging it when h returns nil. While Redis fails it logs and
// retries, waiting from MinBackoff up to MaxBackoff. It returns nil once
// ctx has ended and the handler under way has returned, and an error only
// when Redis refuses what it asks for good (a key of another type, an ACL
// that forbids it, a server without XAUTOCLAIM). A nil h is
// trigger.ErrInvalid.
//
// Several Subscribe calls on one Bus share its consumer name and its
// events. When the last one returns and the consumer has no pending
// entries, it is removed from the group (XGROUP DELCONSUMER).
func (b *Bus) Subscribe(ctx context.Context, h trigger.EventHandler) error {
	if h == nil {
		return fmt.Errorf("%w: redisbus: Subscribe needs a handler, got nil", trigger.ErrInvalid)
	}
	b.mu.Lock()
	b.active++
	b.mu.Unlock()
	s := &subscriber{Bus: b, h: h, needGroup: true}
	err := s.run(ctx)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.active--
	if b.active == 0 && s.healthy {
		b.removeConsumer(context.WithoutCancel(ctx))
	}
	return err
}

// removeConsumer deletes the consumer from the group if it has no
// pending entries (deleting it would drop them). The caller holds b.mu,
// so no Subscribe of this Bus reads meanwhile.
func (b *Bus) removeConsumer(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	pending, err := b.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: b.cfg.Stream, Group: b.cfg.Group, Consumer: b.cfg.Consumer,
		Start: "-", End: "+", Count: 1,
	}).Result()
	if err == nil && len(pending) == 0 {
		err = b.rdb.XGroupDelConsumer(ctx, b.cfg.Stream, b.cfg.Group, b.cfg.Consumer).Err()
	}
	if err != nil {
		b.log.Debug("redisbus: could not remove the consumer from the group", "error", err)
	}
}

// subscriber is the state of one Subscribe call.
type subscriber struct {
	*Bus
	h         trigger.EventHandler
	needGroup bool          // create the group before reading
	backoff   time.Duration // the next wait after an error; 0 after a success
	healthy   bool          // the last call to Redis succeeded
}

func (s *subscriber) run(ctx context.Context) error {
	claimEvery := max(s.cfg.ClaimIdle/2, time.Millisecond)
	var nextClaim time.Time // zero: claim at once, for a dead consumer's entries
	for ctx.Err() == nil {
		var err error
		var op string
		switch {
		case s.needGroup:
			op = "creating the consumer group"
			if err = s.createGroup(ctx); err == nil {
				s.needGroup = false
			}
		case !time.Now().Before(nextClaim):
			op = "claiming idle entries"
			if err = s.claim(ctx); err == nil {
				nextClaim = time.Now().Add(claimEvery)
			}
		default:
			op = "reading new entries"
			err = s.read(ctx, min(s.cfg.Block, max(time.Until(nextClaim), time.Millisecond)))
		}
		if err == nil {
			s.backoff, s.healthy = 0, true
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		s.healthy = false
		if redis.HasErrorPrefix(err, "NOGROUP") {
			s.needGroup = true // deleted under us: create it again
		} else if permanent(err) {
			return fmt.Errorf("redisbus: subscribe: %s: %w", op, err)
		}
		s.backoff = min(max(2*s.backoff, MinBackoff), MaxBackoff)
		s.log.Warn("redisbus: Redis failed; retrying", "op", op, "error", err, "retry_in", s.backoff)
		if !sleep(ctx, s.backoff) {
			return nil
		}
	}
	return nil
}

// permanent reports an error Redis will give again however often it is
// asked: the stream's key holds another type, the ACL forbids the
// command, or the server does not know it.
func permanent(err error) bool {
	return redis.HasErrorPrefix(err, "WRONGTYPE") ||
		redis.HasErrorPrefix(err, "NOPERM") ||
		redis.HasErrorPrefix(err, "unknown command")
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// createGroup creates the group, and the stream if need be, to read the
// stream from its first entry; a group that exists already is left as
// it is.
func (s *subscriber) createGroup(ctx context.Context) error {
	err := s.rdb.XGroupCreateMkStream(ctx, s.cfg.Stream, s.cfg.Group, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return err
	}
	return nil
}

// read reads the entries no consumer has had yet, waiting up to block
// for some, and handles them.
func (s *subscriber) read(ctx context.Context, block time.Duration) error {
	streams, err := s.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    s.cfg.Group,
		Consumer: s.cfg.Consumer,
		Streams:  []string{s.cfg.Stream, ">"},
		Count:    s.cfg.Count,
		Block:    block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil // nothing new
	}
	if err != nil {
		return err
	}
	for _, st := range streams {
		for _, m := range st.Messages {
			if ctx.Err() != nil {
				return nil // the rest stay pending, for a claim
			}
			s.handle(ctx, m, 1)
		}
	}
	return nil
}

// claim takes, with XAUTOCLAIM, every entry pending longer than
// ClaimIdle, looks up how often each has been delivered, and handles it
// or, past MaxDeliveries, moves it to the dead stream.
func (s *subscriber) claim(ctx context.Context) error {
	start := "0-0"
	for {
		msgs, next, deleted, err := s.rdb.XAutoClaimWithDeleted(ctx, &redis.XAutoClaimArgs{
			Stream:   s.cfg.Stream,
			Group:    s.cfg.Group,
			Consumer: s.cfg.Consumer,
			MinIdle:  s.cfg.ClaimIdle,
			Start:    start,
			Count:    s.cfg.Count,
		}).Result()
		if err != nil {
			return err
		}
		if len(deleted) > 0 {
			// Redis 7 drops them from the pending list as it reports them.
			s.log.Error("redisbus: pending entries were trimmed from the stream before being handled; their events are lost (raise MaxLen)",
				"entries", deleted)
		}
		if len(msgs) > 0 {
			counts, err := s.deliveries(ctx, msgs)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if ctx.Err() != nil {
					return nil
				}
				n, ok := counts[m.ID]
				switch {
				case !ok:
					// No longer ours: acknowledged, or claimed by another.
				case n > s.cfg.MaxDeliveries:
					s.bury(ctx, m, n, "delivered more than MaxDeliveries times without being acknowledged")
				default:
					s.handle(ctx, m, n)
				}
			}
		}
		if next == "0-0" || next == "" || ctx.Err() != nil {
			return nil
		}
		start = next
	}
}

// deliveries returns how many times each of msgs has been delivered,
// this time included, for those still pending for this consumer.
func (s *subscriber) deliveries(ctx context.Context, msgs []redis.XMessage) (map[string]int64, error) {
	cmds := make([]*redis.XPendingExtCmd, len(msgs))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range msgs {
			cmds[i] = p.XPendingExt(ctx, &redis.XPendingExtArgs{
				Stream: s.cfg.Stream, Group: s.cfg.Group, Consumer: s.cfg.Consumer,
				Start: m.ID, End: m.ID, Count: 1,
			})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	counts := make(map[string]int64, len(msgs))
	for _, c := range cmds {
		for _, p := range c.Val() {
			counts[p.ID] = p.RetryCount
		}
	}
	return counts, nil
}

// handle decodes an entry delivered for the n-th time and hands it to
// the handler: acknowledged when it returns nil, left pending for a
// later claim when it fails, buried when that was its last delivery or
// when it does not decode.
func (s *subscriber) handle(ctx context.Context, m redis.XMessage, n int64) {
	raw, ok := m.Values[field].(string)
	if !ok {
		s.bury(ctx, m, n, "malformed entry: no "+strconv.Quote(field)+" field")
		return
	}
	ev, err := trigger.DecodeEvent([]byte(raw))
	if err != nil {
		s.bury(ctx, m, n, "malformed entry: "+err.Error())
		return
	}
	if err := s.call(ctx, ev); err != nil {
		switch {
		case ctx.Err() != nil:
			s.log.Debug("redisbus: handler interrupted; the entry stays pending for another consumer",
				"entry", m.ID, "event", ev.ID, "error", err)
		case n >= s.cfg.MaxDeliveries:
			s.bury(ctx, m, n, "handler failed at its last delivery: "+err.Error())
		default:
			s.log.Warn("redisbus: handler failed; the entry will be delivered again after ClaimIdle",
				"entry", m.ID, "event", ev.ID, "tenant", ev.TenantID, "deliveries", n, "error", err)
		}
		return
	}
	// Acknowledge even if ctx ended meanwhile: the event was handled.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.rdb.XAck(actx, s.cfg.Stream, s.cfg.Group, m.ID).Err(); err != nil {
		s.log.Warn("redisbus: could not acknowledge a handled entry; it will be delivered again",
			"entry", m.ID, "event", ev.ID, "error", err)
	}
}

// call runs the handler, turning a panic into an error.
func (s *subscriber) call(ctx context.Context, ev trigger.Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("redisbus: event handler panicked", "event", ev.ID, "tenant", ev.TenantID, "panic", r)
			err = fmt.Errorf("event handler panicked: %v", r)
		}
	}()
	return s.h(ctx, ev)
}

// bury copies an entry to the dead stream, with why and how often it was
// delivered, and acknowledges it.
func (s *subscriber) bury(ctx context.Context, m redis.XMessage, n int64, reason string) {
	values := []any{"entry", m.ID, "reason", reason, "deliveries", n, "consumer", s.cfg.Consumer}
	if raw, ok := m.Values[field].(string); ok {
		values = append(values, field, raw)
	} else if fields, err := json.Marshal(m.Values); err == nil {
		values = append(values, "fields", fields)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: s.dead, MaxLen: s.cfg.MaxLen, Approx: true, Values: values})
		p.XAck(ctx, s.cfg.Stream, s.cfg.Group, m.ID)
		return nil
	})
	if err != nil {
		s.log.Error("redisbus: could not move an entry to the dead stream; it stays pending",
			"entry", m.ID, "reason", reason, "error", err)
		return
	}
	s.log.Error("redisbus: moved an entry to the dead stream", "entry", m.ID, "dead_stream", s.dead,
		"deliveries", n, "reason", reason)
}
