package pgmemory_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// Wiring the provider at start-up. It needs a PostgreSQL, so it is
// compiled but not run.
func Example() {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	mem, err := pgmemory.New(db, pgmemory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	if err := mem.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := mem.Remember(ctx, "alice", memory.Item{Text: "The user's dentist is Dr. Kim.", Kind: "fact"}); err != nil {
		log.Fatal(err)
	}
	items, err := mem.Recall(ctx, "alice", "what's my dentist's name again?", memory.Budget{MaxTokens: 500, MaxEntries: 10})
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range items {
		log.Print(it.Text)
	}
}
