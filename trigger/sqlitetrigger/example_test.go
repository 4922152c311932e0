package sqlitetrigger_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/sqlitetrigger"
)

// Wiring the durable engine on one SQLite file: the store takes the
// *sql.DB the host opened, with the pragmas it needs and one connection
// (River's advice), and a Config whose zero value means the defaults. A
// reminder due in a moment runs through River, and its notice goes out
// once the run is recorded.
func Example() {
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

	store, err := sqlitetrigger.New(db, sqlitetrigger.Config{FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if err := store.Migrate(ctx); err != nil { // at every start
		log.Fatal(err)
	}

	told := make(chan struct{})
	// In a bot the executor is agentexec.New(orchestrator, agentexec.Config{}).
	var exec trigger.ExecutorFunc = func(ctx context.Context, run trigger.ExecRun) (trigger.ExecResult, error) {
		return trigger.ExecResult{Result: "Time to stretch."}, nil
	}
	engine, err := trigger.New(trigger.Config{
		Store:     store,
		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
		Notifiers: map[string]trigger.Notifier{"chat": trigger.NotifierFunc(func(_ context.Context, n trigger.Notification) error {
			fmt.Println("to", n.Target+":", n.Text)
			close(told)
			return nil
		})},
	})
	if err != nil {
		log.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- engine.Run(rctx) }()

	err = engine.CreateTask(ctx, &trigger.Task{
		ID: "stretch", TenantID: "alice", Name: "stretch",
		Trigger: trigger.Trigger{Kind: trigger.KindSchedule, Schedule: trigger.Schedule{At: time.Now().Add(200 * time.Millisecond)}},
		Action:  trigger.Action{Instruction: "Remind me to stretch."},
		Output:  trigger.Output{Channel: "chat", Target: "alice"},
	})
	if err != nil {
		log.Fatal(err)
	}
	<-told
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	task, err := engine.Get(ctx, "alice", "stretch")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Status)
	// Output:
	// to alice: Time to stretch.
	// COMPLETED
}
