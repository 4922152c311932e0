package pgmemory_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// TestPostgresDown: with nothing listening at the pool's address, New
// succeeds (it sends nothing to PostgreSQL), and every call fails at once
// with a "pgmemory: <op>:" error — no panic, no wait for the deadline — that
// does not show the URL's password. It needs no PostgreSQL:
//
//	go test -race -count=1 -run TestPostgresDown ./memory/pgmemory/
func TestPostgresDown(t *testing.T) {
	const secret = "SECRETPW"
	db, err := pgxpool.New(bg, "postgres://user:"+secret+"@127.0.0.1:1/db")
	if err != nil {
		t.Fatal(err) // pgxpool.New does not connect
	}
	defer db.Close()
	p, err := pgmemory.New(db, pgmemory.Config{})
	if err != nil {
		t.Fatalf("New: %v; want a provider (New sends nothing to PostgreSQL)", err)
	}
	call := llm.ToolCall{ID: "c1", Name: "lookup", Arguments: []byte(`{}`)}
	for _, tc := range []struct {
		op string
		fn func(ctx context.Context) error
	}{
		{"migrate", p.Migrate},
		{"history", func(ctx context.Context) error {
			_, err := p.History(ctx, "t", "c", 40)
			return err
		}},
		{"append", func(ctx context.Context) error {
			return p.Append(ctx, "t", "c", llm.UserMessage("hi"), llm.AssistantMessage("", call),
				llm.ToolResultMessage(call, "r", false), llm.AssistantMessage("done"))
		}},
		{"remember", func(ctx context.Context) error {
			_, err := p.Remember(ctx, "t", memory.Item{Text: "the user's dentist is Dr Ana Ruiz"})
			return err
		}},
		{"recall", func(ctx context.Context) error {
			_, err := p.Recall(ctx, "t", "what's my dentist's name?", memory.Budget{MaxTokens: 500, MaxEntries: 10})
			return err
		}},
		{"forget", func(ctx context.Context) error {
			_, err := p.Forget(ctx, "t", memory.Provenance{ConversationID: "c"})
			return err
		}},
		{"delete tenant", func(ctx context.Context) error {
			_, err := p.DeleteTenant(ctx, "t")
			return err
		}},
	} {
		ctx, cancel := context.WithTimeout(bg, 5*time.Second)
		start := time.Now()
		err := tc.fn(ctx)
		took := time.Since(start)
		cancel()
		switch {
		case err == nil:
			t.Errorf("%s with PostgreSQL down: no error", tc.op)
		case strings.Contains(err.Error(), secret):
			t.Errorf("%s: error shows the password: %v", tc.op, err)
		case !strings.HasPrefix(err.Error(), "pgmemory: "+tc.op+": "):
			t.Errorf("%s: error %q does not start with %q", tc.op, err, "pgmemory: "+tc.op+": ")
		case errors.Is(err, context.DeadlineExceeded):
			t.Errorf("%s: waited for the deadline (%v) instead of failing: %v", tc.op, took, err)
		default:
			t.Logf("%s (%v): %v", tc.op, took.Round(time.Millisecond), err)
		}
	}
}
