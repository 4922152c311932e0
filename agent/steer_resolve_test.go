package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// resolving parks a HIGH-risk call of the gate's tool as an approval and
// approves it with ResolveApproval in the background, returning once the
// approved call runs.
func resolving(t *testing.T, g *gate, s *llmtest.Script) (*agent.Orchestrator, <-chan outcome) {
	t.Helper()
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool(tool.WithRisk(tool.RiskHigh))}, Loop: agent.LoopConfig{DirectAgentPrompts: true}})
	res, err := o.HandleMessage(context.Background(), msg("Do the long work"))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("parking the call: %+v, %v", res, err)
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := o.ResolveApproval(context.Background(), "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve})
		done <- outcome{r, err}
	}()
	<-g.started
	return o, done
}

// The run ResolveApproval starts (the approved call, then the loop) is a
// run of its conversation: Cancel stops it as it stops a message's.
func TestCancelStopsTheRunOfAResolvedApproval(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)))
	o, done := resolving(t, g, s)
	if err := o.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatalf("Cancel of the approved call's run: %v", err)
	}
	out := <-done
	if !errors.Is(out.err, agent.ErrCancelled) || out.res.Status != agent.StatusCancelled {
		t.Fatalf("status %s, err %v; want cancelled", out.res.Status, out.err)
	}
	g.mu.Lock()
	stopped := g.ctxErr != nil
	g.mu.Unlock()
	if !stopped {
		t.Fatal("the approved call's ctx was not cancelled")
	}
	checkPaired(t, history(t, o, "u1", "c1"))
	if err := o.Cancel(context.Background(), "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Cancel after the run ended: %v, want ErrNotRunning", err)
	}
}

// Pause stops it at its next turn boundary, after the approved call: the
// user's next message continues the task.
func TestPauseStopsTheRunOfAResolvedApproval(t *testing.T) {
	g := newGate()
	s := llmtest.NewStrictScript(t, llmtest.Calls(llmtest.Call("work", `{}`)), llmtest.Text("Carried on."))
	o, done := resolving(t, g, s)
	if err := o.Pause(context.Background(), "u1", "c1"); err != nil {
		t.Fatalf("Pause of the approved call's run: %v", err)
	}
	close(g.release)
	out := <-done
	if out.err != nil || out.res.Status != agent.StatusPaused {
		t.Fatalf("status %s, err %v; want paused", out.res.Status, out.err)
	}
	res, err := o.HandleMessage(context.Background(), msg("Go on"))
	if err != nil || res.Response != "Carried on." {
		t.Fatalf("the next message: %+v, %v", res, err)
	}
	reqs := s.Requests()
	found := false
	for _, m := range reqs[len(reqs)-1].Messages {
		if strings.Contains(m.Content, "paused the previous request") {
			found = true
		}
	}
	if !found {
		t.Fatal("the next message's run got no note to continue the paused task")
	}
}
