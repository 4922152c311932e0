// Package redispool implements pool.Store, pool.Locker and agent.Control
// (NewControl: steering a running loop from any replica) on Redis, with
// github.com/redis/go-redis/v9. Entries survive restarts and are shared by
// every replica that uses the same key prefix; Take is atomic across them,
// so of replicas racing to resume one entry exactly one wins.
//
//	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // yours to configure and close
//	store, err := redispool.New(rdb, redispool.Config{})           // the zero Config: the defaults
//	locker, err := redispool.NewLocker(rdb, redispool.LockerConfig{Prefix: "prod:"})
//
// Both constructors take the client the host already has, any
// redis.UniversalClient (a *redis.Client, a *redis.ClusterClient, a
// failover client), and a Config whose zero value means the documented
// defaults. Config.Prefix, DefaultPrefix ("valet:") by default, starts
// every key: give each environment sharing a Redis its own.
//
// # Keys
//
// With T the tenant, len(T) its length in bytes and I the entry ID:
//
//	prefix + "pool:{" + len(T) + ":" + T + "}:e:" + I   the entry, as JSON
//	prefix + "pool:{" + len(T) + ":" + T + "}:idx"      the tenant's IDs, scored by ExpiresAt (Unix ms)
//	prefix + "lock:" + key                              a Locker's lock
//
// A Control's, with C the conversation and K = "{" + len(T) + ":" + T +
// "}:" + len(C) + ":" + C:
//
//	prefix + "ctl:" + K + ":run"      the running marker: the run's ID, with TTL
//	prefix + "ctl:" + K + ":paused"   the last run ended paused (QueueTTL)
//	prefix + "ctl:" + K + ":q"        the inject queue, a list (QueueTTL)
//	prefix + "ctl:" + K + ":qb"       its bytes
//	prefix + "ctl:" + K + ":sig"      signals recorded for the running loop (hash of run ID:signal, TTL)
//	prefix + "ctl:sig:" + K           the channel of the conversation's signals ("pause:<run ID>"; bare with no loop running)
//
// The length keeps tenants and IDs that contain ':' or braces from
// colliding; the braces make a tenant's keys one Redis Cluster hash slot.
// An entry's key expires at ExpiresAt + Retention, and the index with its
// last entry, so nothing outlives its use. The Revision is kept in the
// JSON.
//
// # Atomicity
//
// Create, Update, Take, TakeRevision and Delete each run as one Lua
// script: Create checks that the ID is free and counts the tenant's
// unexpired entries against the cap; Update compares the stored revision;
// Take reads and deletes; TakeRevision reads, compares the stored
// revision, and deletes only when it matches. None of them can be seen
// half done. "Now" is the client's clock, so replicas should keep their
// clocks in sync (NTP).
//
// A value that does not decode as an entry of its key is corrupt: Get,
// Take and TakeRevision (whatever the revision asked for) remove it and
// return an error wrapping pool.ErrCorrupt; List removes it, logs a
// warning with the tenant and ID, and returns the rest.
// Errors from Redis itself (a server that is down) come back wrapped as
// "redispool: <op> ...".
//
// # Locks
//
// A lock is SET key token NX PX lease. While held, it is renewed every
// lease/3 with a compare-token script, so it outlives its holder by at
// most one lease; release stops the renewal and deletes the key only if
// it still holds the holder's token. A waiting Lock polls every
// RetryDelay until it gets the key or its ctx ends.
//
// # Control
//
// NewControl subscribes once to the pattern prefix + "ctl:sig:*" (the
// subscription is confirmed before it returns) and hands each signal to
// the subscriptions of the run it names. Publish is one script: when the
// conversation's marker is the run's, PUBLISH of the signal naming the
// run and a record of the signal for that run; otherwise nothing, and
// agent.ErrNotRunning. A signal heard late — after its run ended and the
// conversation's next run began — so never reaches the next run. Begin
// (set the marker; with take, take the paused flag and the queue), End (delete the marker if still
// the run's, forget the run's recorded signals, set the paused flag),
// Push (check the bounds, append) and Drain are each one Lua script;
// Forget is one DEL of the paused flag and the queue. The
// markers of the loops a Control began are refreshed every TTL/3 in one
// pipeline (set again if Redis lost them), which also hands each loop the
// signals recorded for it: a signal whose message was lost while the
// subscription's connection was down (go-redis reconnects and subscribes
// again) reaches the loop within TTL/3 all the same. A process that dies
// stops refreshing, and its markers expire after TTL.
//
// Requires Redis 6.2 or later.
package redispool
