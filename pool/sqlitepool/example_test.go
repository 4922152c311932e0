package sqlitepool_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/pool/sqlitepool"
)

// Wiring the pool on an SQLite file at start-up. An orchestrator takes
// it as agent.Config{Pool: store}; here an entry is parked by hand, the
// file is closed as at the end of the process, and the next start finds
// the entry and takes it, once.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "valet-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "valet.db")

	startUp := func() (*sql.DB, *sqlitepool.Store) {
		db, err := sql.Open("sqlite", "file:"+path+
			"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
		if err != nil {
			log.Fatal(err)
		}
		db.SetMaxOpenConns(1) // River's advice for SQLite
		store, err := sqlitepool.New(db, sqlitepool.Config{})
		if err != nil {
			log.Fatal(err)
		}
		if err := store.Migrate(ctx); err != nil { // at every start
			log.Fatal(err)
		}
		return db, store
	}

	db, store := startUp()
	err = store.Create(ctx, &pool.Entry{
		ID: "agt_1", TenantID: "alice", ConversationID: "c1", AgentName: "send_email",
		Status: pool.StatusWaitingForApproval, ExpiresAt: time.Now().Add(30 * time.Minute),
	})
	if err != nil {
		log.Fatal(err)
	}
	db.Close() // the process ends

	db, store = startUp()
	defer db.Close()
	e, err := store.Take(ctx, "alice", "agt_1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(e.AgentName, e.Status)
	_, err = store.Take(ctx, "alice", "agt_1")
	fmt.Println(err)
	// Output:
	// send_email waiting_for_approval
	// sqlitepool: take (tenant "alice", id "agt_1"): pool: not found
}
