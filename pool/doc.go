// Package pool keeps the Agent-Tools that are waiting: for the user's
// missing input, or for the user's approval. An [Entry] records one such
// agent — its tenant, its collected fields, its pending approval request —
// until the agent resumes, is cancelled, or its wait ends. When the
// Agent-Tool was called inside a sub-agent, Entry.SubAgent holds the loop
// state of the sub-agents it was called in (opaque JSON the orchestrator
// writes and reads; stores keep it as given), so the decision resumes
// them where they stopped, on any replica and after a restart.
//
// # Stores
//
// [Store] is the interface; the orchestrator uses whichever the host
// passes in:
//
//	store, err := pool.NewMemory(pool.MemoryConfig{})     // one process
//	store, err := redispool.New(rdb, redispool.Config{})  // shared by replicas, survives restarts
//	store, err := sqlitepool.New(db, sqlitepool.Config{}) // one SQLite file, survives restarts
//
// Every constructor takes a Config whose zero value means the documented
// defaults (MemoryConfig.MaxPerTenant is DefaultMaxPerTenant, and so on)
// and refuses a negative setting with an error wrapping [ErrInvalidConfig];
// a backend's constructor also takes the client the host already has, here
// rdb, a redis.UniversalClient, or db, the *sql.DB of an SQLite file (nil
// is ErrInvalidConfig too).
//
// Every lookup is by tenant: the same ID in two tenants names two entries,
// and one tenant can never read, take or delete another's.
//
// # Life of an entry
//
// Create stores a new entry and sets its Revision to 1. Update is a
// compare-and-swap on Revision: read the entry, change it, write it back,
// and on ErrConflict read it again — someone else wrote in between.
// Take removes and returns an entry in one atomic step; of several
// callers racing to resume or approve the same entry, exactly one gets it
// and the others ErrNotFound, so the action runs once. List returns a
// tenant's entries, oldest first.
//
// TakeRevision is Take on the condition that the entry is still at a
// given Revision, checked in the same atomic step. It is how a decision
// made on one version of an entry is carried out: read the entry, check
// it (the approval the user saw is the one pending), then take it at the
// Revision that was read.
//
//	e, err := store.Get(ctx, tenantID, id)
//	// ... check e against what the user approved ...
//	e, err = store.TakeRevision(ctx, tenantID, id, e.Revision)
//	switch {
//	case errors.Is(err, pool.ErrConflict): // edited meanwhile: still pooled, present it again
//	case errors.Is(err, pool.ErrNotFound): // someone else took it, or it is gone
//	}
//
// An Update landing between the check and the take makes the take fail
// with ErrConflict and leaves the edited entry in the pool, so the caller
// never holds an entry it must not run and has to put back (a Create that
// can fail and lose it). Of callers racing to take the same revision,
// exactly one gets the entry and the others ErrNotFound.
//
// # Expiry, retention and the cap
//
// ExpiresAt ends the wait. The entry stays readable for the store's
// retention after it (DefaultRetention, an hour), with Expired reporting
// true, so the user can be told that the action expired; then it is gone.
// A tenant may hold DefaultMaxPerTenant unexpired entries; Create past
// that fails with ErrTenantFull. Expired entries do not count.
// [Memory]'s clock comes from MemoryConfig.Clock (nil: clock.System);
// tests pass one clock/clocktest.Clock to everything they wire.
//
// Stores keep times to at least the millisecond.
//
// # Locks
//
// A [Locker] serialises the handling of one conversation: NewMemoryLocker
// within a process (also with pool/sqlitepool, which is for one
// process), redispool.NewLocker across processes.
//
//	release, err := locker.Lock(ctx, tenantID+"/"+conversationID)
//	if err != nil { return err }
//	defer release()
//
// # Errors
//
// Methods return the sentinels ErrNotFound, ErrExists, ErrConflict,
// ErrTenantFull, ErrInvalidEntry and ErrCorrupt wrapped with context;
// check them with errors.Is.
//
// # Writing a store
//
// pool/pooltest is the conformance suite every Store and Locker passes;
// run it from the new store's tests.
package pool
