package agent_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A slow RiskPolicy (one that asks a service) gets the run's ctx: Cancel
// reaches it, the call never runs, the run ends cancelled and the saved
// history keeps every call paired with a result.
func TestCancelReachesASlowRiskPolicy(t *testing.T) {
	sh := &shell{}
	inPolicy := make(chan struct{}, 1)
	policy := func(ctx context.Context, c llm.ToolCall, declared tool.Risk) (tool.Risk, error) {
		inPolicy <- struct{}{}
		<-ctx.Done()
		return 0, ctx.Err()
	}
	s := llmtest.NewScript(
		llmtest.Calls(shellCall("c1", "rm notes.txt")),
		llmtest.Text("Stopped."),
	)
	o := riskOrch(t, s, agent.Config{Loop: agent.LoopConfig{RiskPolicy: policy}}, sh)
	done := start(o, msg("Delete my notes."))
	<-inPolicy
	if err := o.Cancel(context.Background(), "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	out := <-done
	if !errors.Is(out.err, agent.ErrCancelled) || out.res.Status != agent.StatusCancelled {
		t.Fatalf("status %s, err %v; want cancelled", out.res.Status, out.err)
	}
	if got := sh.commands(); len(got) != 0 {
		t.Fatalf("ran %q", got)
	}
	checkPaired(t, history(t, o, "u1", "c1"))
}
