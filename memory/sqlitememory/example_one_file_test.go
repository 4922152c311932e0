package sqlitememory_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/credentials/sqlitestore"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

// One SQLite file holds an assistant's memory and its users'
// credentials: one *sql.DB, opened once, shared by both backends.
func Example_oneFile() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "valet-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "valet.db")+
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // River's advice for SQLite

	mem, err := sqlitememory.New(db, sqlitememory.Config{})
	if err != nil {
		log.Fatal(err)
	}
	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key})
	if err != nil {
		log.Fatal(err)
	}
	creds, err := sqlitestore.New(db, sqlitestore.Config{KeyRing: ring})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range []interface{ Migrate(context.Context) error }{mem, creds} {
		if err := m.Migrate(ctx); err != nil { // at every start
			log.Fatal(err)
		}
	}

	// An orchestrator would take them as agent.Config{Memory: mem, Credentials: creds}.
	err = mem.Append(ctx, "alice", "c1", llm.UserMessage("My dentist is Dr. Kim."), llm.AssistantMessage("Noted."))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := mem.Remember(ctx, "alice", memory.Item{Text: "The user's dentist is Dr. Kim.", Kind: "fact"}); err != nil {
		log.Fatal(err)
	}
	if err := creds.Save(ctx, "alice", "calendar", "", map[string]string{"token": "t0k"}); err != nil {
		log.Fatal(err)
	}

	items, err := mem.Recall(ctx, "alice", "What's my dentist's name again?", memory.Budget{MaxEntries: 3})
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range items {
		fmt.Println(it.Text)
	}
	history, err := mem.History(ctx, "alice", "c1", 40)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(history), "messages")
	infos, err := creds.List(ctx, "alice", "")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(infos[0].Service)
	// Output:
	// The user's dentist is Dr. Kim.
	// 2 messages
	// calendar
}
