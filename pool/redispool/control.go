package redispool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/pool"
)

// Defaults of a zero [ControlConfig].
const (
	// DefaultControlTTL is how long a running marker outlives the process
	// that set it when that process dies; a live one is refreshed every
	// TTL/3.
	DefaultControlTTL = 15 * time.Second
	// DefaultQueueTTL is how long an inject queue and a paused flag wait
	// for the conversation's next message.
	DefaultQueueTTL = 24 * time.Hour
)

// ControlConfig configures [NewControl]. The zero value means the
// documented defaults.
type ControlConfig struct {
	// Prefix starts every key and the signals' channel: Controls that
	// share a prefix (and a Redis) steer each other's loops. Default:
	// DefaultPrefix ("valet:").
	Prefix string
	// TTL is how long a running marker lasts unless refreshed. At least
	// 3ms. Default DefaultControlTTL (15s).
	TTL time.Duration
	// QueueTTL is how long queued texts and a paused flag are kept after
	// the last change. Default DefaultQueueTTL (24h).
	QueueTTL time.Duration
	// MaxQueued and MaxQueuedBytes bound a conversation's inject queue.
	// Negative is an error. Defaults agent.DefaultMaxQueued (16) and
	// agent.DefaultMaxQueuedBytes (64 KiB).
	MaxQueued, MaxQueuedBytes int
	// Logger reports failed refreshes. Default: slog.Default().
	Logger *slog.Logger
}

func (c ControlConfig) withDefaults() (ControlConfig, error) {
	if c.TTL < 0 || (c.TTL > 0 && c.TTL < 3*time.Millisecond) {
		return c, fmt.Errorf("redispool: %w: ControlConfig.TTL %v is under 3ms", pool.ErrInvalidConfig, c.TTL)
	}
	if c.QueueTTL < 0 || c.MaxQueued < 0 || c.MaxQueuedBytes < 0 {
		return c, fmt.Errorf("redispool: %w: negative ControlConfig.QueueTTL, MaxQueued or MaxQueuedBytes", pool.ErrInvalidConfig)
	}
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.TTL = cmp.Or(c.TTL, DefaultControlTTL)
	c.QueueTTL = cmp.Or(c.QueueTTL, DefaultQueueTTL)
	c.MaxQueued = cmp.Or(c.MaxQueued, agent.DefaultMaxQueued)
	c.MaxQueuedBytes = cmp.Or(c.MaxQueuedBytes, agent.DefaultMaxQueuedBytes)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c, nil
}

// Control is an [agent.Control] on Redis, for replicas: a running marker
// per conversation (SET with a TTL, refreshed while the loop runs), an
// inject queue (a list, bounded by a script), and signals published on
// one channel per conversation, heard through a single pattern
// subscription per Control. Close it when done.
type Control struct {
	rdb  redis.UniversalClient
	cfg  ControlConfig
	ps   *redis.PubSub
	sigs string // the channel prefix of signals

	begin, end, push, drain, refresh, publish *redis.Script

	mu   sync.Mutex
	subs map[string][]*ctlSub // by channel
	live map[string]liveRun   // by marker key: the loops begun here, refreshed

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

type ctlSub struct {
	runID string
	fn    func(agent.Signal)
}

// liveRun is a loop begun here: its run ID, and its conversation's
// signal hash and channel.
type liveRun struct{ id, sigs, channel string }

var _ agent.Control = (*Control)(nil)

const (
	// KEYS: marker, paused, queue, queue bytes; ARGV: run ID, TTL ms,
	// take ("1" or "0").
	ctlBeginScript = `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[3] ~= '1' then return {0, {}} end
local p = redis.call('GET', KEYS[2])
if p then redis.call('DEL', KEYS[2]) end
local q = redis.call('LRANGE', KEYS[3], 0, -1)
redis.call('DEL', KEYS[3], KEYS[4])
if p then return {1, q} end
return {0, q}`

	// KEYS: marker, paused, signals; ARGV: run ID, paused ("1" or "0"),
	// queue TTL ms. The signals recorded for the run are forgotten.
	ctlEndScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('HDEL', KEYS[3], ARGV[1] .. ':inject', ARGV[1] .. ':cancel', ARGV[1] .. ':pause')
if ARGV[2] == '1' then redis.call('SET', KEYS[2], '1', 'PX', ARGV[3]) end
return 1`

	// KEYS: queue, queue bytes; ARGV: text, max count, max bytes, TTL ms.
	ctlPushScript = `
local n = redis.call('LLEN', KEYS[1])
local b = tonumber(redis.call('GET', KEYS[2]) or '0')
if n >= tonumber(ARGV[2]) or b + string.len(ARGV[1]) > tonumber(ARGV[3]) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('INCRBY', KEYS[2], string.len(ARGV[1]))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
return 1`

	// KEYS: queue, queue bytes.
	ctlDrainScript = `
local q = redis.call('LRANGE', KEYS[1], 0, -1)
redis.call('DEL', KEYS[1], KEYS[2])
return q`

	// KEYS: marker, signals; ARGV: run ID, TTL ms. A marker that expired
	// (Redis was unreachable for a while) is set again; another run's is
	// left. Returns the signals recorded for the run, and forgets them.
	ctlRefreshScript = `
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
local out = {}
for _, s in ipairs({'inject', 'cancel', 'pause'}) do
  if redis.call('HDEL', KEYS[2], ARGV[1] .. ':' .. s) == 1 then table.insert(out, s) end
end
return out`

	// KEYS: marker, signals; ARGV: signal, channel, TTL ms, run ID. Only
	// while the marker is the run's (else 0): the signal is published
	// naming the run ("pause:<run ID>"), and recorded for it so that the
	// refresh hands it over should the published one be lost.
	ctlPublishScript = `
if redis.call('GET', KEYS[1]) ~= ARGV[4] then return 0 end
redis.call('HSET', KEYS[2], ARGV[4] .. ':' .. ARGV[1], '1')
redis.call('PEXPIRE', KEYS[2], ARGV[3])
redis.call('PUBLISH', ARGV[2], ARGV[1] .. ':' .. ARGV[4])
return 1`
)

// subscribeTimeout bounds NewControl's wait for Redis to confirm the
// subscription to the signals.
const subscribeTimeout = 10 * time.Second

// NewControl returns a Control on rdb, a client the caller configured
// and closes, subscribed to the signals of every conversation under
// cfg.Prefix: the subscription is confirmed before it returns (within
// 10s), so a Redis that cannot be reached fails here. A nil rdb or a
// setting out of range is an error wrapping pool.ErrInvalidConfig.
func NewControl(rdb redis.UniversalClient, cfg ControlConfig) (*Control, error) {
	if rdb == nil {
		return nil, fmt.Errorf("redispool: %w: NewControl needs a redis.UniversalClient, got nil", pool.ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Control{
		rdb: rdb, cfg: cfg, sigs: cfg.Prefix + "ctl:sig:",
		begin: redis.NewScript(ctlBeginScript), end: redis.NewScript(ctlEndScript),
		push: redis.NewScript(ctlPushScript), drain: redis.NewScript(ctlDrainScript),
		refresh: redis.NewScript(ctlRefreshScript), publish: redis.NewScript(ctlPublishScript),
		subs: make(map[string][]*ctlSub), live: make(map[string]liveRun),
		stop: make(chan struct{}),
	}
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	defer cancel()
	c.ps = rdb.PSubscribe(ctx, globEscape(c.sigs)+"*")
	if _, err := c.ps.Receive(ctx); err != nil {
		c.ps.Close()
		return nil, fmt.Errorf("redispool: subscribing to the signals: %w", err)
	}
	ch := c.ps.Channel()
	c.wg.Add(2)
	go c.dispatch(ch)
	go c.keep()
	return c, nil
}

// Close ends the subscription and the refreshing of markers (those of
// loops still running then expire after TTL). It is safe to call more
// than once.
func (c *Control) Close() error {
	var err error
	c.once.Do(func() {
		close(c.stop)
		err = c.ps.Close()
		c.wg.Wait()
	})
	return err
}

// globEscape escapes the glob characters of a PSUBSCRIBE pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// id names a conversation in keys and channels: lengths first, so that
// no two (tenant, conversation) pairs share one; the braces make a
// tenant's keys one Redis Cluster hash slot.
func id(tenant, conversation string) string {
	return "{" + strconv.Itoa(len(tenant)) + ":" + tenant + "}:" + strconv.Itoa(len(conversation)) + ":" + conversation
}

func (c *Control) key(tenant, conversation, what string) string {
	return c.cfg.Prefix + "ctl:" + id(tenant, conversation) + ":" + what
}

// Begin implements agent.Control.
func (c *Control) Begin(ctx context.Context, tenant, conversation, runID string, take bool) (agent.Begun, error) {
	run := c.key(tenant, conversation, "run")
	keys := []string{run, c.key(tenant, conversation, "paused"), c.key(tenant, conversation, "q"), c.key(tenant, conversation, "qb")}
	t := "0"
	if take {
		t = "1"
	}
	v, err := c.begin.Run(ctx, c.rdb, keys, runID, c.cfg.TTL.Milliseconds(), t).Slice()
	if err != nil {
		return agent.Begun{}, fmt.Errorf("redispool: control begin: %w", err)
	}
	var b agent.Begun
	if len(v) == 2 {
		n, _ := v[0].(int64)
		b.Paused = n == 1
		b.Queued = strs(v[1])
	}
	c.mu.Lock()
	c.live[run] = liveRun{id: runID, sigs: c.key(tenant, conversation, "sig"), channel: c.sigs + id(tenant, conversation)}
	c.mu.Unlock()
	return b, nil
}

func strs(v any) []string {
	l, _ := v.([]any)
	if len(l) == 0 {
		return nil
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// End implements agent.Control.
func (c *Control) End(ctx context.Context, tenant, conversation, runID string, paused bool) error {
	run := c.key(tenant, conversation, "run")
	c.mu.Lock()
	if c.live[run].id == runID {
		delete(c.live, run)
	}
	c.mu.Unlock()
	p := "0"
	if paused {
		p = "1"
	}
	if err := c.end.Run(ctx, c.rdb, []string{run, c.key(tenant, conversation, "paused"), c.key(tenant, conversation, "sig")}, runID, p, c.cfg.QueueTTL.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("redispool: control end: %w", err)
	}
	return nil
}

// Running implements agent.Control.
func (c *Control) Running(ctx context.Context, tenant, conversation string) (string, error) {
	v, err := c.rdb.Get(ctx, c.key(tenant, conversation, "run")).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("redispool: control running: %w", err)
	}
	return v, nil
}

// Push implements agent.Control.
func (c *Control) Push(ctx context.Context, tenant, conversation, text string) error {
	keys := []string{c.key(tenant, conversation, "q"), c.key(tenant, conversation, "qb")}
	n, err := c.push.Run(ctx, c.rdb, keys, text, c.cfg.MaxQueued, c.cfg.MaxQueuedBytes, c.cfg.QueueTTL.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("redispool: control push: %w", err)
	}
	if n == 0 {
		return agent.ErrQueueFull
	}
	return nil
}

// Drain implements agent.Control.
func (c *Control) Drain(ctx context.Context, tenant, conversation string) ([]string, error) {
	keys := []string{c.key(tenant, conversation, "q"), c.key(tenant, conversation, "qb")}
	v, err := c.drain.Run(ctx, c.rdb, keys).Slice()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redispool: control drain: %w", err)
	}
	return strs(v), nil
}

// Forget implements agent.Control.
func (c *Control) Forget(ctx context.Context, tenant, conversation string) error {
	// The tenant's hash tag puts the keys in one slot: one DEL.
	err := c.rdb.Del(ctx, c.key(tenant, conversation, "paused"), c.key(tenant, conversation, "q"), c.key(tenant, conversation, "qb")).Err()
	if err != nil {
		return fmt.Errorf("redispool: control forget: %w", err)
	}
	return nil
}

// Publish implements agent.Control. The check that runID is the
// conversation's running loop and the sending are one script. The
// signal is also recorded for the loop, whose Control hands it over at
// its next refresh (within TTL/3) should the published message be lost
// (the subscription's connection was down); a loop may so hear a signal
// twice, which changes nothing. The published signal names its loop, and
// only that loop's subscribers hear it: heard late, after the loop ended
// and the conversation's next run began, it never reaches that next run.
func (c *Control) Publish(ctx context.Context, tenant, conversation, runID string, sig agent.Signal) error {
	if runID == "" {
		return agent.ErrNotRunning
	}
	keys := []string{c.key(tenant, conversation, "run"), c.key(tenant, conversation, "sig")}
	n, err := c.publish.Run(ctx, c.rdb, keys, string(sig), c.sigs+id(tenant, conversation), c.cfg.TTL.Milliseconds(), runID).Int()
	if err != nil {
		return fmt.Errorf("redispool: control publish: %w", err)
	}
	if n == 0 {
		return agent.ErrNotRunning
	}
	return nil
}

// Subscribe implements agent.Control: fn is called from the Control's
// dispatching goroutine (or its refreshing one, for a signal whose
// published message was lost).
func (c *Control) Subscribe(tenant, conversation, runID string, fn func(agent.Signal)) (stop func()) {
	ch := c.sigs + id(tenant, conversation)
	s := &ctlSub{runID: runID, fn: fn}
	c.mu.Lock()
	c.subs[ch] = append(c.subs[ch], s)
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		l := slices.DeleteFunc(c.subs[ch], func(x *ctlSub) bool { return x == s })
		if len(l) == 0 {
			delete(c.subs, ch)
		} else {
			c.subs[ch] = l
		}
	}
}

// subsOf returns the subscriptions to channel for the loop runID.
func (c *Control) subsOf(channel, runID string) []*ctlSub {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*ctlSub
	for _, s := range c.subs[channel] {
		if s.runID == runID {
			out = append(out, s)
		}
	}
	return out
}

// dispatch hands each signal to the subscribers of the loop it names.
func (c *Control) dispatch(ch <-chan *redis.Message) {
	defer c.wg.Done()
	for m := range ch {
		p, runID, _ := strings.Cut(m.Payload, ":")
		sig := agent.Signal(p)
		switch sig {
		case agent.SignalInject, agent.SignalCancel, agent.SignalPause:
		default:
			continue // not a signal of ours
		}
		if runID == "" {
			continue // a bare signal (of an older version) names no loop
		}
		for _, s := range c.subsOf(m.Channel, runID) {
			s.fn(sig)
		}
	}
}

// keep refreshes the markers of the loops begun here every TTL/3, until
// Close.
func (c *Control) keep() {
	defer c.wg.Done()
	every := c.cfg.TTL / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		c.refreshAll(every)
	}
}

// refreshAll refreshes the markers of the loops begun here in one
// pipeline, and hands them the signals recorded for them.
func (c *Control) refreshAll(every time.Duration) {
	c.mu.Lock()
	keys := make([]string, 0, len(c.live))
	runs := make([]liveRun, 0, len(c.live))
	for k, v := range c.live {
		keys, runs = append(keys, k), append(runs, v)
	}
	c.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(every, time.Second))
	defer cancel()
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		// EVAL: a pipeline cannot fall back from EVALSHA.
		cmds[i] = c.refresh.Eval(ctx, pipe, []string{k, runs[i].sigs}, runs[i].id, c.cfg.TTL.Milliseconds())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		c.cfg.Logger.Warn("redispool: refreshing running markers failed; will retry", "markers", len(keys), "err", err)
	}
	for i, cmd := range cmds {
		sigs, err := cmd.StringSlice()
		if err != nil || len(sigs) == 0 {
			continue
		}
		c.mu.Lock()
		still := c.live[keys[i]].id == runs[i].id
		c.mu.Unlock()
		if !still {
			continue // the loop ended meanwhile
		}
		subs := c.subsOf(runs[i].channel, runs[i].id)
		for _, s := range sigs {
			for _, sub := range subs {
				sub.fn(agent.Signal(s))
			}
		}
	}
}
