package sqlitedb_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/sqlitedb"
)

// One file, one call: the program opens the file, Open gives every store
// on it, and the orchestrator keeps its conversations there.
func ExampleOpen() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "valet-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := sql.Open("sqlite", sqlitedb.DSN(filepath.Join(dir, "valet.db")))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // River's advice for SQLite

	// In a real program the key comes from outside the file: an
	// environment variable, a secret manager, a key file.
	key := make([]byte, credentials.KeySize)
	rand.Read(key)
	ring, err := credentials.NewKeyRing("k1", map[string][]byte{"k1": key})
	if err != nil {
		log.Fatal(err)
	}
	stores, err := sqlitedb.Open(ctx, db, sqlitedb.Config{KeyRing: ring}) // at every start
	if err != nil {
		log.Fatal(err)
	}

	o, err := agent.NewOrchestrator(agent.Config{
		LLM:         llmtest.NewScript(llmtest.Text("Hello, Ana.")),
		Credentials: stores.Credentials,
		Memory:      stores.Memory,
		Pool:        stores.Pool, // pending approvals survive a restart
	})
	if err != nil {
		log.Fatal(err)
	}
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "ana", ConversationID: "c1", Text: "Hi, I'm Ana."})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Response)

	// What a restarted program reads back from the file.
	history, err := stores.Memory.History(ctx, "ana", "c1", 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range history {
		fmt.Printf("%s: %s\n", m.Role, m.Content)
	}
	// Output:
	// Hello, Ana.
	// user: Hi, I'm Ana.
	// assistant: Hello, Ana.
}
