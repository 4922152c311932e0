package rivertrigger_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/rivertrigger"
)

// One rule for every valet package: a nil Logger means slog.Default().
// A Store without one reports that River cannot start (PostgreSQL is
// unreachable) there, instead of discarding it. No PostgreSQL needed.
// Not parallel: it swaps slog.Default.
func TestNilLoggerIsSlogDefault(t *testing.T) {
	old := slog.Default()
	var logs syncBuffer
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	cfg, err := pgxpool.ParseConfig("postgres://valet@127.0.0.1:1/valet?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := rivertrigger.New(pool, rivertrigger.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := trigger.New(trigger.Config{Store: s, Executors: map[string]trigger.Executor{trigger.DefaultExecutor: nopExec{}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Dispatch(ctx, e) }()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "starting River; trying again") {
		if time.Now().After(deadline) {
			t.Fatalf("slog.Default got %q", logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type nopExec struct{}

func (nopExec) Execute(context.Context, trigger.ExecRun) (trigger.ExecResult, error) {
	return trigger.ExecResult{}, nil
}
