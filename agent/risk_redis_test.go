package agent_test

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/pool/redispool"
)

// riskReplica is one orchestrator process on the shared Redis prefix, its
// shell tool recording into sh.
func riskReplica(t *testing.T, prefix string, sh *shell, first ...llm.ToolCall) *agent.Orchestrator {
	t.Helper()
	rdb := redisClient(t, prefix)
	store, err := redispool.New(rdb, redispool.Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	m := &riskModel{first: first, used: len(first) == 0}
	return riskOrch(t, m.client(t), agent.Config{Pool: store}, sh)
}

// Decisions racing on two replicas sharing Redis run the waiting call
// once: by ResolveApproval and by the user's "yes" alike.
func TestRiskyCallRunsOnceAcrossReplicas(t *testing.T) {
	for round := range 3 {
		prefix := "valettest:risk:" + rand.Text()[:10] + ":"
		sh := &shell{}
		a := riskReplica(t, prefix, sh, shellCall("c1", "rm notes.txt"))
		b := riskReplica(t, prefix, sh)
		ctx := context.Background()
		first, err := a.HandleMessage(ctx, msg("Delete my notes."))
		if err != nil || len(first.PendingApprovals) != 1 {
			t.Fatalf("first: %+v, %v", first, err)
		}
		id := first.PendingApprovals[0].ID
		if list, err := b.ListPendingApprovals(ctx, "u1"); err != nil || len(list) != 1 || list[0].ID != id || list[0].AgentName != "tool:shell" {
			t.Fatalf("replica b sees %+v, %v", list, err)
		}
		var wg sync.WaitGroup
		var wins atomic.Int32
		start := make(chan struct{})
		for i := range 10 {
			o := []*agent.Orchestrator{a, b}[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if i%5 == 4 {
					if _, err := o.HandleMessage(ctx, msg("yes")); err != nil {
						t.Errorf("reply: %v", err)
					}
					return
				}
				_, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve})
				switch {
				case err == nil:
					wins.Add(1)
				case !errors.Is(err, approval.ErrNotFound):
					t.Errorf("loser's error: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if got := sh.commands(); !slices.Equal(got, []string{"rm notes.txt"}) {
			t.Fatalf("round %d: ran %q", round, got)
		}
		if wins.Load() > 1 {
			t.Fatalf("round %d: %d winners", round, wins.Load())
		}
	}
}

// The waiting call survives a restart on Redis: a new process approves it
// and it runs there, once.
func TestRiskyCallSurvivesRestartOnRedis(t *testing.T) {
	prefix := "valettest:risk:" + rand.Text()[:10] + ":"
	ctx := context.Background()
	sh := &shell{}
	before := riskReplica(t, prefix, sh, shellCall("c1", "rm notes.txt"))
	res, err := before.HandleMessage(ctx, msg("Delete my notes."))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res %+v, %v", res, err)
	}
	before.Close(ctx)
	after := riskReplica(t, prefix, sh)
	req := res.PendingApprovals[0]
	res2, err := after.ResolveApproval(ctx, "u1", req.ID, approval.Decision{Action: approval.Approve, Fingerprint: req.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.commands(); !slices.Equal(got, []string{"rm notes.txt"}) || res2.Response != "Done: ran rm notes.txt" {
		t.Fatalf("ran %q; res %q", got, res2.Response)
	}
	if list, err := after.ListPendingApprovals(ctx, "u1"); err != nil || len(list) != 0 {
		t.Fatalf("still pending: %+v, %v", list, err)
	}
}
