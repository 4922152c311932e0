package redispool

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/valetkit/valet/pool"
)

// DefaultPrefix starts every key the Store and the Locker write.
const DefaultPrefix = "valet:"

// Config configures [New]. The zero value means the documented defaults.
type Config struct {
	// Logger reports corrupt values the store removed.
	// Default: slog.Default().
	Logger *slog.Logger
	// MaxPerTenant is how many unexpired entries one tenant may hold;
	// Create past it fails with pool.ErrTenantFull. Negative is an error.
	// Default: pool.DefaultMaxPerTenant.
	MaxPerTenant int
	// Prefix starts every key the store writes (see "Keys" in the package
	// documentation): stores that share a prefix share their entries, so
	// give each environment sharing a Redis its own.
	// Default: DefaultPrefix ("valet:").
	Prefix string
	// Retention is how long an entry stays readable after its ExpiresAt;
	// stores that share a prefix should share it too. At least a
	// millisecond. Default: pool.DefaultRetention (an hour).
	Retention time.Duration
}

// withDefaults returns c with its defaults filled in, or an error wrapping
// pool.ErrInvalidConfig naming the field it rejects.
func (c Config) withDefaults() (Config, error) {
	if c.MaxPerTenant < 0 {
		return c, fmt.Errorf("redispool: %w: negative MaxPerTenant %d", pool.ErrInvalidConfig, c.MaxPerTenant)
	}
	if c.Retention < 0 || (c.Retention > 0 && c.Retention < time.Millisecond) {
		return c, fmt.Errorf("redispool: %w: Retention %v is under a millisecond", pool.ErrInvalidConfig, c.Retention)
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.MaxPerTenant = cmp.Or(c.MaxPerTenant, pool.DefaultMaxPerTenant)
	c.Prefix = cmp.Or(c.Prefix, DefaultPrefix)
	c.Retention = cmp.Or(c.Retention, pool.DefaultRetention)
	return c, nil
}

// Store is a [pool.Store] on Redis. It is safe for concurrent use, also by
// several processes on one prefix.
type Store struct {
	rdb       redis.UniversalClient
	prefix    string
	max       int
	retention time.Duration
	log       *slog.Logger

	create, update, take, takeRevision, del, drop, prune *redis.Script
}

var _ pool.Store = (*Store)(nil)

// New returns a Store on rdb, a client the caller configured and closes:
// a *redis.Client, *redis.ClusterClient (a tenant's keys share one hash
// slot) or a failover client. The zero Config means the defaults. A nil
// rdb or a setting out of range is an error wrapping pool.ErrInvalidConfig.
// It sends nothing to Redis yet.
func New(rdb redis.UniversalClient, cfg Config) (*Store, error) {
	if rdb == nil {
		return nil, fmt.Errorf("redispool: %w: New needs a redis.UniversalClient, got nil", pool.ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		rdb:          rdb,
		prefix:       cfg.Prefix,
		max:          cfg.MaxPerTenant,
		retention:    cfg.Retention,
		log:          cfg.Logger,
		create:       redis.NewScript(createScript),
		update:       redis.NewScript(updateScript),
		take:         redis.NewScript(takeScript),
		takeRevision: redis.NewScript(takeRevisionScript),
		del:          redis.NewScript(deleteScript),
		drop:         redis.NewScript(dropScript),
		prune:        redis.NewScript(pruneScript),
	}, nil
}

// tenantKey is the part of the keys that names the tenant:
// prefix + "pool:{" + len(tenant) + ":" + tenant + "}". The length makes
// the tenant's end unambiguous whatever it contains; the braces make it
// the hash tag, so a tenant's keys share a Redis Cluster slot.
func (s *Store) tenantKey(tenantID string) string {
	return s.prefix + "pool:{" + strconv.Itoa(len(tenantID)) + ":" + tenantID + "}"
}

// entryKey holds one entry as JSON: tenantKey + ":e:" + id.
func (s *Store) entryKey(tenantID, id string) string { return s.tenantKey(tenantID) + ":e:" + id }

// indexKey is the tenant's sorted set of ids, scored by ExpiresAt in
// Unix milliseconds: tenantKey + ":idx".
func (s *Store) indexKey(tenantID string) string { return s.tenantKey(tenantID) + ":idx" }

func (s *Store) keys(tenantID, id string) []string {
	return []string{s.entryKey(tenantID, id), s.indexKey(tenantID)}
}

func ms(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// The scripts. Each runs atomically on the server; KEYS[1] is the entry,
// KEYS[2] the tenant's index, ARGV[1] the id. Times are Unix
// milliseconds from the client's clock. An entry's key expires at
// ExpiresAt+Retention ("gone"); the index expires with its last entry.
const (
	// writeEntry ends createScript and updateScript: store the value until
	// "gone", index it by expiry, and keep the index alive as long as its
	// longest-lived entry. ARGV: id, value, expires, now, gone.
	writeEntry = `
redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local ttl = redis.call('PTTL', KEYS[2])
if ttl < 0 or tonumber(ARGV[4]) + ttl < tonumber(ARGV[5]) then
  redis.call('PEXPIREAT', KEYS[2], ARGV[5])
end
return 'ok'`

	// ARGV: id, value, expires, now, gone, cutoff (now-retention), max.
	createScript = `
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[6])
if redis.call('EXISTS', KEYS[1]) == 1 then return 'exists' end
if redis.call('ZCOUNT', KEYS[2], '(' .. ARGV[4], '+inf') >= tonumber(ARGV[7]) then return 'full' end
if tonumber(ARGV[5]) <= tonumber(ARGV[4]) then return 'ok' end
` + writeEntry

	// ARGV: id, value, expires, now, gone, expected revision.
	updateScript = `
local cur = redis.call('GET', KEYS[1])
if not cur then return 'notfound' end
local ok, doc = pcall(cjson.decode, cur)
if not ok or type(doc) ~= 'table' or type(doc['revision']) ~= 'number' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'corrupt'
end
if doc['revision'] ~= tonumber(ARGV[6]) then return 'conflict' end
if tonumber(ARGV[5]) <= tonumber(ARGV[4]) then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'ok'
end
` + writeEntry

	// ARGV: id. Returns the value, or nil when there is none.
	takeScript = `
local v = redis.call('GET', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if not v then return false end
redis.call('DEL', KEYS[1])
return v`

	// Take if the stored revision is the expected one. ARGV: id, expected
	// revision. Returns {'ok', value} having removed the entry,
	// {'conflict', value} leaving it, 'corrupt' having removed a value
	// without a revision, or nil when there is none.
	takeRevisionScript = `
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return false
end
local ok, doc = pcall(cjson.decode, v)
if not ok or type(doc) ~= 'table' or type(doc['revision']) ~= 'number' then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 'corrupt'
end
if doc['revision'] ~= tonumber(ARGV[2]) then return {'conflict', v} end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return {'ok', v}`

	// ARGV: id. Returns how many entries were removed.
	deleteScript = `
local n = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return n`

	// Removes a corrupt value, unless it was overwritten since it was read.
	// ARGV: id, the corrupt value.
	dropScript = `
if redis.call('GET', KEYS[1]) == ARGV[2] then
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
  return 1
end
return 0`

	// Removes an index member whose entry is gone (evicted, say).
	// ARGV: id.
	pruneScript = `
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('ZREM', KEYS[2], ARGV[1])
end
return 0`
)

// Create adds e; see [pool.Store.Create]. It sets e.Revision to 1 and
// e.CreatedAt and e.UpdatedAt to now when they are zero. An entry whose
// ExpiresAt+Retention has already passed is accepted and not stored.
func (s *Store) Create(ctx context.Context, e *pool.Entry) error {
	if err := ctx.Err(); err != nil {
		return interpretError(err, "create", e)
	}
	if err := e.Check(); err != nil {
		return fmt.Errorf("redispool: create: %w", err)
	}
	now := time.Now()
	v := e.Clone()
	v.Revision = 1
	if v.CreatedAt.IsZero() {
		v.CreatedAt = now
	}
	if v.UpdatedAt.IsZero() {
		v.UpdatedAt = now
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("redispool: create: %w: %v", pool.ErrInvalidEntry, err)
	}
	status, err := s.create.Run(ctx, s.rdb, s.keys(e.TenantID, e.ID),
		e.ID, data, ms(e.ExpiresAt), ms(now), ms(e.ExpiresAt.Add(s.retention)),
		ms(now.Add(-s.retention)), s.max).Text()
	if err == nil {
		err = scriptError(status)
	}
	if errors.Is(err, pool.ErrTenantFull) {
		err = fmt.Errorf("%w (the cap is %d unexpired entries)", err, s.max)
	}
	if err != nil {
		return interpretError(err, "create", e)
	}
	e.Revision, e.CreatedAt, e.UpdatedAt = v.Revision, v.CreatedAt, v.UpdatedAt
	return nil
}

// Update replaces the stored entry with e if the revisions match; see
// [pool.Store.Update]. It increments e.Revision and sets e.UpdatedAt to
// now. e.CreatedAt is stored as given and must not be zero.
func (s *Store) Update(ctx context.Context, e *pool.Entry) error {
	if err := ctx.Err(); err != nil {
		return interpretError(err, "update", e)
	}
	if err := e.Check(); err != nil {
		return fmt.Errorf("redispool: update: %w", err)
	}
	if e.CreatedAt.IsZero() {
		return fmt.Errorf("redispool: update: %w: zero CreatedAt (entry %q); update the entry Get returned", pool.ErrInvalidEntry, e.ID)
	}
	now := time.Now()
	v := e.Clone()
	v.Revision++
	v.UpdatedAt = now
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("redispool: update: %w: %v", pool.ErrInvalidEntry, err)
	}
	status, err := s.update.Run(ctx, s.rdb, s.keys(e.TenantID, e.ID),
		e.ID, data, ms(e.ExpiresAt), ms(now), ms(e.ExpiresAt.Add(s.retention)),
		e.Revision).Text()
	if err == nil {
		err = scriptError(status)
	}
	if errors.Is(err, pool.ErrCorrupt) {
		s.log.Warn("redispool: removed a corrupt pool entry", "tenant", e.TenantID, "id", e.ID, "op", "update")
	}
	if err != nil {
		return interpretError(err, "update", e)
	}
	e.Revision, e.UpdatedAt = v.Revision, v.UpdatedAt
	return nil
}

// Get returns the tenant's entry; see [pool.Store.Get]. A corrupt value
// is removed and reported as pool.ErrCorrupt.
func (s *Store) Get(ctx context.Context, tenantID, id string) (*pool.Entry, error) {
	ref := &pool.Entry{TenantID: tenantID, ID: id}
	if err := ctx.Err(); err != nil {
		return nil, interpretError(err, "get", ref)
	}
	data, err := s.rdb.Get(ctx, s.entryKey(tenantID, id)).Result()
	if err != nil {
		return nil, interpretError(err, "get", ref)
	}
	e, err := decode(tenantID, id, data)
	if err != nil {
		s.log.Warn("redispool: removing a corrupt pool entry", "tenant", tenantID, "id", id, "op", "get", "err", err)
		if derr := s.drop.Run(ctx, s.rdb, s.keys(tenantID, id), id, data).Err(); derr != nil {
			err = errors.Join(err, fmt.Errorf("removing it: %w", derr))
		}
		return nil, interpretError(err, "get", ref)
	}
	return e, nil
}

// List returns the tenant's entries, oldest CreatedAt first, ties broken
// by ID. Corrupt values are removed, logged and left out.
func (s *Store) List(ctx context.Context, tenantID string) ([]*pool.Entry, error) {
	ref := &pool.Entry{TenantID: tenantID}
	if err := ctx.Err(); err != nil {
		return nil, interpretError(err, "list", ref)
	}
	now := time.Now()
	ids, err := s.rdb.ZRangeByScore(ctx, s.indexKey(tenantID), &redis.ZRangeBy{
		Min: "(" + ms(now.Add(-s.retention)), Max: "+inf",
	}).Result()
	if err != nil {
		return nil, interpretError(err, "list", ref)
	}
	out := make([]*pool.Entry, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.entryKey(tenantID, id)
	}
	values, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, interpretError(err, "list", ref)
	}
	for i, v := range values {
		id := ids[i]
		data, ok := v.(string)
		if !ok { // the entry is gone; its index member stayed behind
			if err := s.prune.Run(ctx, s.rdb, s.keys(tenantID, id), id).Err(); err != nil {
				return nil, interpretError(err, "list", ref)
			}
			continue
		}
		e, err := decode(tenantID, id, data)
		if err != nil {
			s.log.Warn("redispool: removing a corrupt pool entry", "tenant", tenantID, "id", id, "op", "list", "err", err)
			if err := s.drop.Run(ctx, s.rdb, s.keys(tenantID, id), id, data).Err(); err != nil {
				return nil, interpretError(err, "list", ref)
			}
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *pool.Entry) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Take removes the tenant's entry and returns it, in one script; see
// [pool.Store.Take]. A corrupt value is removed all the same and reported
// as pool.ErrCorrupt.
func (s *Store) Take(ctx context.Context, tenantID, id string) (*pool.Entry, error) {
	ref := &pool.Entry{TenantID: tenantID, ID: id}
	if err := ctx.Err(); err != nil {
		return nil, interpretError(err, "take", ref)
	}
	data, err := s.take.Run(ctx, s.rdb, s.keys(tenantID, id), id).Text()
	if err != nil {
		return nil, interpretError(err, "take", ref)
	}
	e, err := decode(tenantID, id, data)
	if err != nil {
		s.log.Warn("redispool: removed a corrupt pool entry", "tenant", tenantID, "id", id, "op", "take", "err", err)
		return nil, interpretError(err, "take", ref)
	}
	return e, nil
}

// TakeRevision removes the tenant's entry and returns it if its stored
// Revision is revision, in one script that compares the revisions; see
// [pool.Store.TakeRevision]. A corrupt value is removed whatever its
// revision and reported as pool.ErrCorrupt, as Take does.
func (s *Store) TakeRevision(ctx context.Context, tenantID, id string, revision int64) (*pool.Entry, error) {
	const op = "take revision"
	ref := &pool.Entry{TenantID: tenantID, ID: id}
	if err := ctx.Err(); err != nil {
		return nil, interpretError(err, op, ref)
	}
	reply, err := s.takeRevision.Run(ctx, s.rdb, s.keys(tenantID, id), id, revision).Result()
	if err != nil {
		return nil, interpretError(err, op, ref)
	}
	status, data, err := takeReply(reply)
	if err != nil {
		if errors.Is(err, pool.ErrCorrupt) {
			s.log.Warn("redispool: removed a corrupt pool entry", "tenant", tenantID, "id", id, "op", op, "err", err)
		}
		return nil, interpretError(err, op, ref)
	}
	e, err := decode(tenantID, id, data)
	if err != nil {
		if status == "ok" { // the script removed it already
			s.log.Warn("redispool: removed a corrupt pool entry", "tenant", tenantID, "id", id, "op", op, "err", err)
			return nil, interpretError(err, op, ref)
		}
		s.log.Warn("redispool: removing a corrupt pool entry", "tenant", tenantID, "id", id, "op", op, "err", err)
		if derr := s.drop.Run(ctx, s.rdb, s.keys(tenantID, id), id, data).Err(); derr != nil {
			err = errors.Join(err, fmt.Errorf("removing it: %w", derr))
		}
		return nil, interpretError(err, op, ref)
	}
	if status == "conflict" {
		return nil, interpretError(fmt.Errorf("%w: revision %d, stored %d", pool.ErrConflict, revision, e.Revision), op, ref)
	}
	return e, nil
}

// takeReply splits takeRevisionScript's reply into its status ("ok" or
// "conflict") and the stored value, or returns the error it stands for.
func takeReply(reply any) (status, data string, err error) {
	switch r := reply.(type) {
	case string:
		return "", "", scriptError(r)
	case []any:
		if len(r) == 2 {
			status, ok1 := r[0].(string)
			data, ok2 := r[1].(string)
			if ok1 && ok2 && (status == "ok" || status == "conflict") {
				return status, data, nil
			}
		}
	}
	return "", "", fmt.Errorf("unexpected script reply %v", reply)
}

// Delete removes the tenant's entry; see [pool.Store.Delete].
func (s *Store) Delete(ctx context.Context, tenantID, id string) error {
	ref := &pool.Entry{TenantID: tenantID, ID: id}
	if err := ctx.Err(); err != nil {
		return interpretError(err, "delete", ref)
	}
	n, err := s.del.Run(ctx, s.rdb, s.keys(tenantID, id), id).Int()
	if err == nil && n == 0 {
		err = redis.Nil
	}
	return interpretError(err, "delete", ref)
}

// decode turns a stored value into the entry of tenantID and id, or
// returns an error wrapping pool.ErrCorrupt.
func decode(tenantID, id, data string) (*pool.Entry, error) {
	var e pool.Entry
	if err := json.Unmarshal([]byte(data), &e); err != nil {
		return nil, fmt.Errorf("%w: %v", pool.ErrCorrupt, err)
	}
	if err := e.Check(); err != nil {
		return nil, fmt.Errorf("%w: %v", pool.ErrCorrupt, err)
	}
	if e.TenantID != tenantID || e.ID != id {
		return nil, fmt.Errorf("%w: the value is entry %q of tenant %q", pool.ErrCorrupt, e.ID, e.TenantID)
	}
	if e.Revision < 1 {
		return nil, fmt.Errorf("%w: revision %d", pool.ErrCorrupt, e.Revision)
	}
	return &e, nil
}

// scriptError maps a script's status reply onto the pool's errors.
func scriptError(status string) error {
	switch status {
	case "ok":
		return nil
	case "exists":
		return pool.ErrExists
	case "full":
		return pool.ErrTenantFull
	case "conflict":
		return pool.ErrConflict
	case "notfound":
		return redis.Nil
	case "corrupt":
		return fmt.Errorf("%w: the stored value has no revision; removed", pool.ErrCorrupt)
	}
	return fmt.Errorf("unexpected script reply %q", status)
}

// interpretError is the one place Redis errors become the store's:
// redis.Nil is pool.ErrNotFound, and every error names the operation and
// the entry.
func interpretError(err error, op string, e *pool.Entry) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, redis.Nil) {
		err = pool.ErrNotFound
	}
	if e == nil {
		return fmt.Errorf("redispool: %s: %w", op, err)
	}
	if e.ID == "" {
		return fmt.Errorf("redispool: %s (tenant %q): %w", op, e.TenantID, err)
	}
	return fmt.Errorf("redispool: %s (tenant %q, id %q): %w", op, e.TenantID, e.ID, err)
}
