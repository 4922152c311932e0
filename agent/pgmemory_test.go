package agent_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/internal/pgtest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory/pgmemory"
	"github.com/valetkit/valet/pool/redispool"
)

// pgReplica is one orchestrator process of a deployment on PostgreSQL
// (memory, in schema) and Redis (pool and conversation lock, under
// prefix): its own connections, its own model.
func pgReplica(t *testing.T, schema, prefix string, model llm.Client, email *emailAgent) *agent.Orchestrator {
	t.Helper()
	mem, err := pgmemory.New(pgtest.DB(t), pgmemory.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	rdb := redisClient(t, prefix)
	store, err := redispool.New(rdb, redispool.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	locker, err := redispool.NewLocker(rdb, redispool.LockerConfig{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return agentsOrch(t, model, agent.Config{Pool: store, Locker: locker, Memory: mem}, email, &noteAgent{})
}

// echoModel answers every message with its text, after the newest user
// message it was sent; asked to send mail, it calls send_email first.
func echoModel() *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == llm.RoleUser && strings.HasPrefix(last.Content, "mail") && len(req.Tools) > 0 {
			return llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))
		}
		for i := len(req.Messages) - 1; i >= 0; i-- {
			if m := req.Messages[i]; m.Role == llm.RoleUser {
				return llmtest.Text("echo: " + m.Content)
			}
		}
		return llmtest.Text("echo")
	})
}

// Two replicas sharing PostgreSQL and Redis answer one conversation, many
// messages at once: the Locker serialises them, every turn is saved whole
// and in order, and each replica's model sees the other's turns.
func TestReplicasOnPostgresShareHistory(t *testing.T) {
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	prefix := "valettest:" + rand.Text()[:10] + ":"
	ma, mb := echoModel(), echoModel()
	a := pgReplica(t, schema, prefix, ma, &emailAgent{})
	b := pgReplica(t, schema, prefix, mb, &emailAgent{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := []*agent.Orchestrator{a, b}[i%2]
			if _, err := o.HandleMessage(ctx, msg(fmt.Sprintf("message %d", i))); err != nil {
				t.Errorf("message %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	mem, err := pgmemory.New(db, pgmemory.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	h, err := mem.History(ctx, "u1", "c1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 24 {
		t.Fatalf("history holds %d messages, want 24", len(h))
	}
	seen := map[string]bool{}
	for i := 0; i < len(h); i += 2 {
		u, ans := h[i], h[i+1]
		if u.Role != llm.RoleUser || ans.Role != llm.RoleAssistant || ans.Content != "echo: "+u.Content || seen[u.Content] {
			t.Fatalf("turn %d is %q / %q: turns interleaved or lost", i/2, u.Content, ans.Content)
		}
		seen[u.Content] = true
	}
	// The last request of each replica held every turn saved before it.
	for _, s := range []*llmtest.Script{ma, mb} {
		reqs := s.Requests()
		last := reqs[len(reqs)-1].Messages
		if n := len(last); n < 2 || n%2 != 0 { // system + whole turns + the message
			t.Fatalf("a replica's last request has %d messages: %q", n, roles(last))
		}
	}
}

// A restart between the request for approval and the user's yes: the new
// process approves from Redis and its model sees the conversation so far
// from PostgreSQL, the draft it approves included.
func TestRestartKeepsTheConversationOfAnApproval(t *testing.T) {
	db := pgtest.DB(t)
	schema := pgtest.Schema(t, db)
	prefix := "valettest:" + rand.Text()[:10] + ":"
	email := &emailAgent{}
	before := pgReplica(t, schema, prefix, echoModel(), email)
	ctx := context.Background()
	res, err := before.HandleMessage(ctx, msg("mail the team about the plan"))
	if err != nil || res.Status != agent.StatusWaitingForApproval {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	closeOrch(t, before)

	m := echoModel()
	after := pgReplica(t, schema, prefix, m, email) // the restarted process
	res, err = after.HandleMessage(ctx, msg("yes"))
	if err != nil || len(email.Sent()) != 1 || res.Status != agent.StatusCompleted {
		t.Fatalf("res = %+v, err = %v, sent %d", res, err, len(email.Sent()))
	}
	sent := m.Requests()[len(m.Requests())-1].Messages
	var sawDraft, sawRequest bool
	for _, x := range sent {
		sawRequest = sawRequest || x.Role == llm.RoleUser && x.Content == "mail the team about the plan"
		for _, c := range x.ToolCalls {
			sawDraft = sawDraft || c.Name == "send_email" && strings.Contains(string(c.Arguments), "team@example.com")
		}
	}
	if !sawRequest || !sawDraft {
		t.Fatalf("after the restart the model was sent %q without the earlier request or draft", roles(sent))
	}
}

// PostgreSQL down: a message fails before any model call with
// ErrHistoryNotLoaded, quickly, and no password in the error.
func TestPostgresMemoryDown(t *testing.T) {
	const secret = "SECRETPW"
	db, err := pgxpool.New(context.Background(), "postgres://user:"+secret+"@127.0.0.1:1/db?connect_timeout=1")
	if err != nil {
		t.Fatal(err) // pgxpool.New does not connect
	}
	defer db.Close()
	mem, err := pgmemory.New(db, pgmemory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScript(llmtest.Text("never"))
	o := newOrch(t, s, agent.Config{Memory: mem})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := o.HandleMessage(ctx, msg("hi"))
	if !errors.Is(err, agent.ErrHistoryNotLoaded) || res.Status != agent.StatusError || s.Calls() != 0 {
		t.Fatalf("err = %v, status %s, model calls %d; want ErrHistoryNotLoaded before any call", err, res.Status, s.Calls())
	}
	if strings.Contains(fmt.Sprintf("%v %+v", err, err), secret) {
		t.Fatalf("the password leaked: %v", err)
	}
}
