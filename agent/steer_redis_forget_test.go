package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
)

// On Redis too, Forget of a paused conversation (from the other replica)
// forgets the pause: the next message starts afresh, with no note asking
// the model to continue the forgotten task.
func TestForgetAfterPauseOnRedisDropsTheResumeNote(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	g := newGate()
	s1 := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Hello."),
	)
	o1, o2, ctl1 := replicas(t, s1, llmtest.NewStrictScript(t), g, agent.LoopConfig{})
	done := start(o1, msg("Do the long thing"))
	<-g.started
	h := heard(t, ctl1, "u1", "c1")
	if err := o2.Pause(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	<-h
	close(g.release)
	if out := <-done; out.err != nil || out.res.Status != agent.StatusPaused {
		t.Fatalf("status %s, err %v; want paused", out.res.Status, out.err)
	}
	if err := o2.Forget(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	if _, err := o1.HandleMessage(ctx, msg("Hi, new topic")); err != nil {
		t.Fatal(err)
	}
	for _, m := range s1.Requests()[1].Messages {
		if strings.Contains(m.Content, "paused the previous request") {
			t.Fatalf("the first run after Forget was told to continue the forgotten paused task: %q", m.Content)
		}
	}
}

// A conversation ID with glob characters is a literal name: an Inject and
// a Cancel for conversation "c*" (no loop running there) never reach the
// loop running in "c1" on the other replica.
func TestSteeringAGlobConversationReachesNoOtherOnRedis(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	g := newGate()
	s1 := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Done."),
	)
	o1, o2, _ := replicas(t, s1, llmtest.NewStrictScript(t), g, agent.LoopConfig{})
	done := start(o1, msg("Do the long thing"))
	<-g.started
	for _, conv := range []string{"c*", "c?", "c[1]", "*"} {
		if err := o2.Cancel(ctx, "u1", conv); err == nil {
			t.Fatalf("Cancel of %q (nothing running there) succeeded", conv)
		}
		if err := o2.Inject(ctx, "u1", conv, "stray text for "+conv); err != nil {
			t.Fatal(err)
		}
	}
	close(g.release)
	out := <-done
	if out.err != nil || out.res.Status != agent.StatusCompleted {
		t.Fatalf("status %s, err %v", out.res.Status, out.err)
	}
	for _, m := range s1.Requests()[1].Messages {
		if strings.Contains(m.Content, "stray text") {
			t.Fatalf("text injected into another conversation reached c1: %q", m.Content)
		}
	}
}
