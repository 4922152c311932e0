package agent_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool/redispool"
)

// Two replicas (two Redis clients on one pool, one memory) decide the same
// sub-agent's request concurrently, by ResolveApproval and by the user's
// reply: the action runs once. (Covered before on the memory pool only.)
func TestSubAgentApprovalRunsOnceAcrossRedisReplicas(t *testing.T) {
	for round := range 3 {
		prefix := "valettest:" + rand.Text()[:10] + ":"
		mem, err := memory.NewInMemory(memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		email := &emailAgent{}
		mk := func() *agent.Orchestrator {
			store, err := redispool.New(redisClient(t, prefix), redispool.Config{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
			return subOrch(t, s, agent.Config{Pool: store, Memory: mem}, email)
		}
		a, b := mk(), mk()
		res, err := a.HandleMessage(context.Background(), msg("Tell the team."))
		if err != nil {
			t.Fatal(err)
		}
		id := res.PendingApprovals[0].ID
		var wg sync.WaitGroup
		var wins atomic.Int32
		start := make(chan struct{})
		for i := range 8 {
			o := []*agent.Orchestrator{a, b}[i%2]
			wg.Go(func() {
				<-start
				if i%4 >= 2 {
					_, _ = o.HandleMessage(context.Background(), msg("yes"))
					return
				}
				_, err := o.ResolveApproval(context.Background(), "u1", id, approval.Decision{Action: approval.Approve})
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, approval.ErrNotFound):
					t.Errorf("a losing decision: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := len(email.Sent()); n != 1 || wins.Load() > 1 {
			t.Fatalf("round %d: sent %d times, %d decisions won; want 1 and at most 1", round, n, wins.Load())
		}
		if rest, err := b.PendingAgents(context.Background(), "u1"); err != nil || len(rest) != 0 {
			t.Fatalf("round %d: still pending %+v, %v", round, rest, err)
		}
	}
}

// Forget races a decision of the conversation's parked sub-agent, on two
// replicas sharing Redis (pool and Locker) and one memory: whichever wins,
// the email is sent at most once, and once both are done the forgotten
// conversation holds nothing: no history, no pending request.
func TestForgetRacesSubAgentDecisionAcrossReplicas(t *testing.T) {
	for round := range 4 {
		prefix := "valettest:" + rand.Text()[:10] + ":"
		mem, err := memory.NewInMemory(memory.Config{})
		if err != nil {
			t.Fatal(err)
		}
		email := &emailAgent{}
		mk := func() *agent.Orchestrator {
			rdb := redisClient(t, prefix)
			store, err := redispool.New(rdb, redispool.Config{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			l, err := redispool.NewLocker(rdb, redispool.LockerConfig{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
			return subOrch(t, s, agent.Config{Pool: store, Memory: mem, Locker: l}, email)
		}
		a, b := mk(), mk()
		ctx := context.Background()
		res, err := a.HandleMessage(ctx, msg("Tell the team."))
		if err != nil {
			t.Fatal(err)
		}
		id := res.PendingApprovals[0].ID
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			_, err := a.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve})
			if err != nil && !errors.Is(err, approval.ErrNotFound) {
				t.Errorf("round %d: decision: %v", round, err)
			}
		})
		wg.Go(func() {
			<-start
			if err := b.Forget(ctx, "u1", "c1"); err != nil {
				t.Errorf("round %d: Forget: %v", round, err)
			}
		})
		close(start)
		wg.Wait()
		if n := len(email.Sent()); n > 1 {
			t.Fatalf("round %d: sent %d", round, n)
		}
		// A Forget that ran after the decision finished leaves nothing; one
		// that ran first left nothing to decide.
		h, err := a.History(ctx, "u1", "c1")
		if err != nil {
			t.Fatal(err)
		}
		if len(h) != 0 {
			t.Fatalf("round %d (sent %d): the forgotten conversation holds %d messages", round, len(email.Sent()), len(h))
		}
		if p, err := b.PendingAgents(ctx, "u1"); err != nil || len(p) != 0 {
			t.Fatalf("round %d: pending %+v, %v", round, p, err)
		}
	}
}

// Two sub-agents of one turn park; one reply of the user approving both
// decides both: each email is sent once, both sub-agents go on, and each
// answer enters the coordinator's conversation, which stays paired.
func TestOneReplyApprovesTwoParkedSubAgents(t *testing.T) {
	ctx := context.Background()
	email := &emailAgent{}
	coord := coordinator("Email alice.", "Email bob.")
	s := &subScript{t: t, coord: func(req llm.Request) llmtest.Reply {
		if req.ToolChoice == approval.ResolveToolName {
			return llmtest.ApproveAll()
		}
		return coord(req)
	}}
	s.worker = func(task string, req llm.Request) llmtest.Reply {
		to := "alice@example.com"
		if task == "Email bob." {
			to = "bob@example.com"
		}
		return emailingWorker(`{"to":"`+to+`","subject":"Hi"}`)(task, req)
	}
	o := subOrch(t, s, agent.Config{}, email)
	res, err := o.HandleMessage(ctx, msg("Email both."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 2 {
		t.Fatalf("approvals %+v, want two", res.PendingApprovals)
	}
	res2, err := o.HandleMessage(ctx, msg("Approve both of them."))
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]int{}
	for _, e := range email.Sent() {
		sent[e.To]++
	}
	if len(sent) != 2 || sent["alice@example.com"] != 1 || sent["bob@example.com"] != 1 {
		t.Fatalf("sent %v, want alice and bob once each", sent)
	}
	if len(res2.Decided) != 2 || len(res2.PendingApprovals) != 0 {
		t.Fatalf("decided %+v, pending %+v", res2.Decided, res2.PendingApprovals)
	}
	h, err := o.History(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckPairing(h); err != nil {
		t.Fatal(err)
	}
	for _, r := range res.PendingApprovals {
		if got := spawnResumeResult(h, r.ID); !strings.HasPrefix(got, "Worker: Email sent to ") {
			t.Fatalf("the resumed spawn of %s holds %q", r.ID, got)
		}
	}
}
