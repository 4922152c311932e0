// Package pool keeps the Agent-Tools that are waiting: for the user's
// missing input, or for the user's approval. An [Entry] records one such
// agent — its tenant, its collected fields, its pending approval request —
// until the agent resumes, is cancelled, or its wait ends.
//
// # Stores
//
// [Store] is the interface; the orchestrator uses whichever the host
// passes in:
//
//	store := pool.NewMemory()                               // one process
//	store, err := redispool.New(rdb, redispool.Options{})   // shared by replicas, survives restarts
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
// # Expiry, retention and the cap
//
// ExpiresAt ends the wait. The entry stays readable for the store's
// retention after it (DefaultRetention, an hour), with Expired reporting
// true, so the user can be told that the action expired; then it is gone.
// A tenant may hold DefaultMaxPerTenant unexpired entries; Create past
// that fails with ErrTenantFull. Expired entries do not count.
//
// Stores keep times to at least the millisecond.
//
// # Locks
//
// A [Locker] serialises the handling of one conversation: NewMemoryLocker
// within a process, redispool.NewLocker across processes.
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
