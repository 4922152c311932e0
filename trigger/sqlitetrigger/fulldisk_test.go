package sqlitetrigger_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/trigger"
)

// A full disk mid-write (SQLite's max_page_count reached, which fails as
// a full disk does, with SQLITE_FULL): the error surfaces, saying so, and
// nothing of the failed Create is read back — neither the task nor its
// River job.
func TestFullDiskMidWrite(t *testing.T) {
	s, db := newStore(t, fast())
	ctx := context.Background()
	e, err := trigger.New(trigger.Config{Store: s, Executors: map[string]trigger.Executor{trigger.DefaultExecutor: trigger.ExecutorFunc(
		func(context.Context, trigger.ExecRun) (trigger.ExecResult, error) { return trigger.ExecResult{}, nil })}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateTask(ctx, oneTime("a", "before", time.Now().Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	// One connection: the limit holds for every later statement.
	var pages int
	if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	big := oneTime("a", "big", time.Now().Add(time.Hour))
	big.Description = strings.Repeat("a long description that needs pages of its own ", 1200)
	err = e.CreateTask(ctx, big)
	if err == nil || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("Create on a full disk: %v", err)
	}
	if _, err := e.Get(ctx, "a", "big"); !errors.Is(err, trigger.ErrNotFound) {
		t.Errorf("the task of the failed Create: %v, want ErrNotFound", err)
	}
	if st := jobStates(t, db, "big"); len(st) != 0 {
		t.Errorf("jobs of the failed Create: %v, want none", st)
	}
	if _, err := e.Get(ctx, "a", "before"); err != nil {
		t.Errorf("the task made before: %v", err)
	}
}
