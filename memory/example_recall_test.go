package memory_test

import (
	"context"
	"fmt"

	"github.com/valetkit/valet/memory"
)

// The first thing a bot's memory is: a Provider. NewInMemory takes a
// Config whose zero value means the documented bounds, and refuses a
// negative setting with ErrInvalid, as memory/pgmemory.New(db,
// pgmemory.Config{...}), the one that survives restarts, does. What is
// remembered for a tenant is recalled by the user's message as typed, and
// never for another tenant.
func Example() {
	ctx := context.Background()
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}

	_, err = mem.Remember(ctx, "alice",
		memory.Item{Text: "The user's dentist is Dr. Kim.", Kind: "fact"},
		memory.Item{Text: "The user's sister lives in Lyon.", Kind: "fact"},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	items, _ := mem.Recall(ctx, "alice", "Book my dentist for Friday", memory.Budget{MaxEntries: 5})
	for _, it := range items {
		fmt.Println("alice:", it.Text)
	}
	items, _ = mem.Recall(ctx, "bob", "Book my dentist for Friday", memory.Budget{MaxEntries: 5})
	fmt.Println("bob:", len(items), "items")
	// Output:
	// alice: The user's dentist is Dr. Kim.
	// bob: 0 items
}
