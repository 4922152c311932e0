package pool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valetkit/valet/pool"
)

// The first thing a bot's pool of waiting Agent-Tools is: a Store.
// NewMemory takes a MemoryConfig whose zero value means the documented
// defaults, and refuses a negative setting with ErrInvalidConfig, as
// pool/redispool.New(rdb, redispool.Config{...}), the one shared by
// replicas, does. The orchestrator parks an agent waiting for the user
// here and takes it back, once, when the user answers.
func Example() {
	ctx := context.Background()
	store, err := pool.NewMemory(pool.MemoryConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}

	err = store.Create(ctx, &pool.Entry{
		ID:        "call_1",
		TenantID:  "alice",
		AgentName: "book_table",
		Status:    pool.StatusWaitingForInput,
		Missing:   []string{"time"},
		ExpiresAt: time.Now().Add(30 * time.Minute),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	waiting, _ := store.List(ctx, "alice")
	fmt.Println("alice waits on:", waiting[0].AgentName, waiting[0].Missing)

	e, err := store.Take(ctx, "alice", "call_1") // the user answered
	fmt.Println("taken:", e.ID, err)
	_, err = store.Take(ctx, "alice", "call_1") // a second reply, or a replica
	fmt.Println("taken again:", errors.Is(err, pool.ErrNotFound))
	// Output:
	// alice waits on: book_table [time]
	// taken: call_1 <nil>
	// taken again: true
}
