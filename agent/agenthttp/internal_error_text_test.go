package agenthttp_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// slowStore is a memory provider whose History times out deep inside,
// its error naming the database host and user, as a driver's does.
type slowStore struct{ memory.Provider }

func (slowStore) History(ctx context.Context, tenantID, conversationID string, limit int) ([]llm.Message, error) {
	return nil, fmt.Errorf("pgmemory: history: dial tcp 10.20.30.40:5432 (user=valet_admin): %w", context.DeadlineExceeded)
}

// An internal failure is to be "a 500 internal whose cause is logged,
// never shown". A cause that wraps context.DeadlineExceeded (any driver
// timeout) matches an error rule instead, and its whole text, the
// database's address and user included, is the answer's message.
// FAILS at the time of writing: 503 {"code":"cancelled","message":"…dial tcp 10.20.30.40:5432 (user=valet_admin)…"}.
func TestStoreTimeoutDoesNotShowItsInternalText(t *testing.T) {
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, llmtest.NewStrictScript(t), agent.Config{Memory: slowStore{mem}}, agenthttp.Config{})
	r := e.do(http.MethodGet, "/conversations/c1/messages", "ann", "")
	code, msg := r.errorOf(t)
	if r.status < 500 || strings.Contains(msg, "10.20.30.40") || strings.Contains(msg, "valet_admin") {
		t.Fatalf("%d %s: %s", r.status, code, msg)
	}
}
