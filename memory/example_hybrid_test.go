package memory_test

import (
	"context"
	"fmt"

	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// With an Embedder, an item is recalled by a query that shares no word
// with it. llmtest.Embedder stands in for a real model (such as
// openai.Client) here: it makes "teeth" alike "dentist".
func ExampleNewInMemory_hybrid() {
	ctx := context.Background()
	emb := llmtest.NewEmbedder(0).Concept("dentist", "teeth")
	mem, err := memory.NewInMemory(memory.Config{Embedder: emb})
	if err != nil {
		fmt.Println(err)
		return
	}

	_, _ = mem.Remember(ctx, "alice",
		memory.Item{Text: "The user's dentist is Dr. Kim."},
		memory.Item{Text: "The user prefers morning appointments."},
	)
	items, _ := mem.Recall(ctx, "alice", "Who fixes my teeth?", memory.Budget{MaxTokens: 500, MaxEntries: 5})
	for _, it := range items {
		fmt.Println("recalled:", it.Text)
	}
	// Output:
	// recalled: The user's dentist is Dr. Kim.
}
