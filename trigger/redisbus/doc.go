// Package redisbus implements trigger.EventBus on a Redis stream read by
// a consumer group, with github.com/redis/go-redis/v9. Events survive
// restarts, and every replica whose Bus names the same stream and group
// shares them: each event goes to one replica.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // yours to configure and close
//	bus, err := redisbus.New(rdb, redisbus.Config{Namespace: store.Namespace()}) // stream "valet:<namespace>:events", group "valet-engine"
//	err = bus.Publish(ctx, trigger.Event{ID: "msg-1", TenantID: "acme", Source: "gmail", Type: "message.received"})
//	err = bus.Subscribe(ctx, handle) // until ctx ends
//
// New takes the client the host already has, any redis.UniversalClient
// (a *redis.Client, a *redis.ClusterClient, a failover client), and a
// Config whose zero value means the documented defaults.
//
// # Namespaces
//
// A Bus belongs to one deployment: its Config.Namespace names it, and the
// stream is named from it and Config.Prefix, Prefix + Namespace +
// ":events" ([StreamFor]; Prefix + "events" when there is no namespace,
// [DefaultStream], "valet:events", with the default prefix). Prefix is
// the key prefix of pool/redispool too, DefaultPrefix ("valet:") by
// default: an environment given its own prefix keeps all of valet's keys
// apart in a shared Redis. Give the Bus the namespace of the engine's
// store — rivertrigger.Store.Namespace, the PostgreSQL database and
// schema of its tasks — so production and staging sharing one Redis read
// different streams: a shared stream and group
// would hand production's events to staging's engine, which would run
// staging's tasks on them while production's never fire. trigger.New
// refuses a Bus and a Store whose namespaces differ (the Bus implements
// trigger.Namespaced), the default "" included, so the mistake shows at
// start. Config.Stream still chooses a stream of your own; keep it
// unique per deployment.
//
// Namespaces can still collide: two deployments whose databases have the
// same name on two servers get the same default namespace. So the stream
// has an owner: [Bus.ClaimNamespace] (trigger.NamespaceClaimer), which
// trigger.Engine.Run calls before it starts with the store's instance id
// (trigger.InstanceIdentifier: rivertrigger's, the identity of its
// database and schema, not of the server's name), sets the key
// [Bus.OwnerKey], Stream + ":owner", to the id when it is unset (SET NX,
// no expiry). An engine whose data is not the owner gets an error
// wrapping trigger.ErrInvalid and does not start: set
// rivertrigger.Config.Namespace and redisbus.Config.Namespace per
// environment. One database reached by two host names is one owner.
// Delete the key when a deployment moves to new data on purpose; a key
// lost (Redis without persistence, eviction) is set again by the next
// engine to start. Publish and Subscribe do not check it.
//
// # Keys
//
//	Stream                 the events, one entry each: a field "event" holding the event as JSON
//	Stream + ":dead"       the entries given up on, with why (see Dead entries)
//	Stream + ":owner"      the instance id of the data that owns the stream (see Namespaces)
//
// On Redis Cluster the three are in different slots; nothing needs them
// together.
//
// # Delivery
//
// Publish checks the event (trigger.ErrInvalid for an invalid one, one
// whose Data cannot be encoded as JSON, or is over trigger.MaxEventSize
// encoded) and adds it with XADD. It returns once Redis has it; an error
// from Redis comes back wrapped, as "redisbus: publish event ...".
//
// Subscribe creates the group with XGROUP CREATE ... MKSTREAM from the
// stream's first entry (a group that exists already is kept, with its
// position), then reads with XREADGROUP the entries no consumer has had,
// hands each to the handler in turn, and acknowledges it (XACK) when the
// handler returns nil. Delivery is at least once: an entry whose handler
// fails, or whose consumer dies or stops before acknowledging it, stays
// pending; every ClaimIdle/2 each Subscribe takes the entries pending
// longer than ClaimIdle with XAUTOCLAIM and handles them again. So a
// failed event is retried after ClaimIdle (to at most 1.5×ClaimIdle), and
// a handler must finish well within ClaimIdle — indeed a batch of Count
// entries, handled in turn, must — or an entry is taken by another
// consumer while this one still holds it, and handled twice. The event's ID stays the
// same on every delivery; handlers are idempotent by it.
//
// Entries read in a batch (Count) but not yet handled when Subscribe's
// ctx ends stay pending too, and wait ClaimIdle for another consumer.
//
// # Dead entries
//
// An entry is given up on — copied to the dead stream with its entry id,
// the reason, its delivery count and the consumer, then acknowledged, and
// logged at level Error — when its handler fails on its MaxDeliveries-th
// delivery, when a claim finds it delivered more often than that (its
// consumers kept dying), or when it is malformed: no "event" field, or
// JSON that is not a valid event. A malformed entry never stops the loop.
// Inspect the dead stream with XRANGE; re-publish what should run.
//
// # Trimming
//
// XADD trims the stream with MAXLEN ~ MaxLen (default 100,000): Redis
// drops the oldest entries, in whole nodes, once the stream is longer —
// acknowledged or not. An entry trimmed while pending is lost: its
// event is never delivered again (a claim that finds it gone logs its id
// at level Error). Size MaxLen well above the largest
// backlog you expect (events published while no consumer keeps up).
//
// # Failures
//
// While Redis is unreachable or fails, Subscribe logs at level Warn and
// retries, waiting MinBackoff at first and twice as long each time up to
// MaxBackoff; it recreates the group if it was deleted (NOGROUP). It
// returns nil once its ctx ends, and an error only when Redis refuses
// for good: the key holds another type (WRONGTYPE), the ACL forbids the
// command (NOPERM), or the server lacks it (Redis before 6.2). Errors
// carry what Redis or the network said, never the client's options, so
// no password.
//
// Consumers are named per Bus (host name, process id, a random suffix,
// unless Config.Consumer says otherwise). When the last Subscribe of a
// Bus returns and its consumer has nothing pending, the consumer is
// removed from the group, so restarts do not pile up consumers.
//
// Requires Redis 6.2 or later (XAUTOCLAIM).
package redisbus
