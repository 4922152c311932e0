package agent_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// Two replicas sharing a Redis Control, no loop running: Cancel and Pause
// on either fail with ErrNotRunning, and an Inject made on the first is
// queued in Redis and seen by the conversation's next message, handled on
// the second, before that message.
func TestSteeringWithNoRunningLoopAcrossReplicas(t *testing.T) {
	needRedis(t)
	s2 := llmtest.NewStrictScript(t, llmtest.Text("Noted: window seat."))
	o1, o2, _ := replicas(t, llmtest.NewStrictScript(t), s2, newGate(), agent.LoopConfig{})
	ctx := context.Background()
	for i, o := range []*agent.Orchestrator{o1, o2} {
		if err := o.Cancel(ctx, "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
			t.Fatalf("replica %d: Cancel with nothing running: %v, want ErrNotRunning", i+1, err)
		}
		if err := o.Pause(ctx, "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
			t.Fatalf("replica %d: Pause with nothing running: %v, want ErrNotRunning", i+1, err)
		}
	}
	if err := o1.Inject(ctx, "u1", "c1", "I want a window seat"); err != nil {
		t.Fatalf("Inject with no loop running: %v, want it queued", err)
	}
	res, err := o2.HandleMessage(ctx, msg("Book the flight"))
	if err != nil || res.Status != agent.StatusCompleted {
		t.Fatalf("next message on the other replica: %v, %v", res.Status, err)
	}
	var users []string
	for _, m := range s2.Requests()[0].Messages {
		if m.Role == llm.RoleUser {
			users = append(users, m.Content)
		}
	}
	if len(users) != 2 || !strings.Contains(users[0], "I want a window seat") || users[1] != "Book the flight" {
		t.Fatalf("the next message's request holds the users' messages %q; want the injected text, then the message", users)
	}
	// The message's run has ended: nothing to pause on either replica.
	if err := o1.Pause(ctx, "u1", "c1"); !errors.Is(err, agent.ErrNotRunning) {
		t.Fatalf("Pause after the message ended: %v, want ErrNotRunning", err)
	}
}
