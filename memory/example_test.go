package memory_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

func ExampleNewInMemory() {
	ctx := context.Background()
	mem, err := memory.NewInMemory(memory.Config{}) // bounded, with the defaults
	if err != nil {
		fmt.Println(err)
		return
	}

	// Each completed turn of a conversation is appended...
	call := llm.ToolCall{ID: "call_1", Name: "contacts", Arguments: []byte(`{"q":"dentist"}`)}
	err = mem.Append(ctx, "alice", "c1",
		llm.UserMessage("Book my dentist, Dr. Kim, for Friday."),
		llm.AssistantMessage("", call),
		llm.ToolResultMessage(call, `{"phone":"555-0100"}`, false),
		llm.AssistantMessage("Booked with Dr. Kim for Friday at 10:00."),
	)
	fmt.Println("append:", err)
	// ...and the newest messages come back, never starting with a tool
	// result: the window of 2 would, so it starts after it.
	history, _ := mem.History(ctx, "alice", "c1", 2)
	fmt.Printf("history: %d message: %q\n", len(history), history[0].Content)

	// Durable facts are remembered with what wrote them...
	ids, _ := mem.Remember(ctx, "alice",
		memory.Item{Text: "The user's dentist is Dr. Kim.", Kind: "fact", Source: memory.Provenance{ConversationID: "c1"}},
		memory.Item{Text: "The user prefers morning appointments.", Kind: "preference", Source: memory.Provenance{ConversationID: "c1"}},
	)
	// ...and recalled in a later conversation by the user's message as typed.
	items, _ := mem.Recall(ctx, "alice", "What's my dentist's name again?", memory.Budget{MaxTokens: 500, MaxEntries: 5})
	for _, it := range items {
		fmt.Printf("recalled: %s (%d tokens)\n", it.Text, it.Tokens)
	}
	items, _ = mem.Recall(ctx, "alice", "What is it?", memory.Budget{}) // only stop words
	fmt.Println("stop words recall:", len(items))

	// A new fact replaces an old one in recall.
	_, _ = mem.Remember(ctx, "alice", memory.Item{
		Text:       "The user's dentist is now Dr. Lee.",
		Supersedes: ids[0],
		Source:     memory.Provenance{ConversationID: "c2"},
	})
	items, _ = mem.Recall(ctx, "alice", "dentist", memory.Budget{})
	for _, it := range items {
		fmt.Println("after the change:", it.Text)
	}

	// Deleting a conversation purges its history and what it taught.
	n, _ := mem.Forget(ctx, "alice", memory.Provenance{ConversationID: "c1"})
	fmt.Println("forgot:", n, "(2 items, 4 messages)")
	history, _ = mem.History(ctx, "alice", "c1", 0)
	fmt.Println("history after forget:", len(history))

	_, err = mem.Forget(ctx, "alice", memory.Provenance{})
	fmt.Println("empty provenance:", errors.Is(err, memory.ErrInvalid))
	// Output:
	// append: <nil>
	// history: 1 message: "Booked with Dr. Kim for Friday at 10:00."
	// recalled: The user's dentist is Dr. Kim. (10 tokens)
	// stop words recall: 0
	// after the change: The user's dentist is now Dr. Lee.
	// forgot: 6 (2 items, 4 messages)
	// history after forget: 0
	// empty provenance: true
}
