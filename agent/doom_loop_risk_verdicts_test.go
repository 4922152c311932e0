package agent_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// High-risk calls that wait for the user's approval have not failed:
// five of them in one turn (five files to remove, each shown to the user)
// are not "5 tool calls in a row failed", so the doom-loop detector stays
// silent and the model is not told its calls failed.
func TestDoomLoopIgnoresCallsWaitingForApproval(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	var calls []llm.ToolCall
	for i := range 5 {
		calls = append(calls, shellCall(fmt.Sprintf("c%d", i), fmt.Sprintf("rm file%d.txt", i)))
	}
	m := &riskModel{first: calls}
	var steps stepLog
	o := riskOrch(t, m.client(t), agent.Config{Observer: &steps}, sh)
	res, err := o.HandleMessage(ctx, msg("Remove the five files."))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusWaitingForApproval {
		t.Fatalf("status %s, want waiting for approval", res.Status)
	}
	for _, s := range steps.all() {
		if s.Kind == agent.StepDoomLoop {
			t.Fatalf("calls waiting for approval were counted as failures: %q", s.Text)
		}
	}
	for _, r := range m.reqs {
		if n := notesWith(r.Messages, "failed"); n != 0 {
			t.Fatalf("the model was told its waiting calls failed: %+v", r.Messages)
		}
	}
}

// A model that keeps making a call the risk policy denies is going round
// in circles: the same denied call three times gets the repeated-call
// note.
func TestDoomLoopNotesARepeatedDeniedCall(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	c := shellCall("x", "sudo reboot")
	s := llmtest.NewStrictScript(t, llmtest.Calls(c), llmtest.Calls(c), llmtest.Calls(c), llmtest.Text("I cannot reboot."))
	var steps stepLog
	o := riskOrch(t, s, agent.Config{Observer: &steps}, sh)
	if _, err := o.HandleMessage(ctx, msg("Reboot.")); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, st := range steps.all() {
		if st.Kind == agent.StepDoomLoop {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d doom-loop interventions for the same denied call made 3 times, want 1", n)
	}
}
