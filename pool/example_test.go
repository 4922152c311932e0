package pool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/pool"
)

func ExampleMemory() {
	ctx := context.Background()
	store, err := pool.NewMemory(pool.MemoryConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}

	e := &pool.Entry{
		ID:        "call_1",
		TenantID:  "alice",
		AgentName: "send_email",
		Status:    pool.StatusWaitingForInput,
		Missing:   []string{"subject"},
		ExpiresAt: time.Now().Add(30 * time.Minute),
	}
	if err := store.Create(ctx, e); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("created, revision", e.Revision)

	// Another tenant cannot see it.
	_, err = store.Get(ctx, "bob", "call_1")
	fmt.Println("bob:", errors.Is(err, pool.ErrNotFound))

	// Update is a compare-and-swap on Revision.
	e.Missing = nil
	e.Status = pool.StatusWaitingForApproval
	stale := e.Clone()
	if err := store.Update(ctx, e); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("updated, revision", e.Revision)
	fmt.Println("stale update:", errors.Is(store.Update(ctx, stale), pool.ErrConflict))

	// TakeRevision takes the entry only at the revision a decision was
	// made on; after an edit it takes nothing.
	_, err = store.TakeRevision(ctx, "alice", "call_1", stale.Revision)
	fmt.Println("stale take:", errors.Is(err, pool.ErrConflict))

	// Take hands the entry to exactly one caller.
	got, err := store.Take(ctx, "alice", "call_1")
	fmt.Println("took", got.ID, got.Status, err)
	_, err = store.Take(ctx, "alice", "call_1")
	fmt.Println("second take:", errors.Is(err, pool.ErrNotFound))
	// Output:
	// created, revision 1
	// bob: true
	// updated, revision 2
	// stale update: true
	// stale take: true
	// took call_1 waiting_for_approval <nil>
	// second take: true
}

func ExampleMemoryLocker() {
	locker := pool.NewMemoryLocker()
	release, err := locker.Lock(context.Background(), "alice/conv-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer release()

	// A second Lock of the same key waits until release or its ctx ends.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err = locker.Lock(ctx, "alice/conv-1")
	fmt.Println(err)
	// Output:
	// context deadline exceeded
}
