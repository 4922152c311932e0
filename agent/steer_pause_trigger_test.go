package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A paused task is resumed by the user's next message: a triggered run
// (a reminder, an event) that arrives first neither is told "the user's
// new message" may continue the paused task, nor uses up the pause, so
// the user's own next message still gets the note.
func TestTriggeredRunDoesNotConsumeAPause(t *testing.T) {
	ctx := context.Background()
	g := newGate()
	s := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("work", `{}`)),
		llmtest.Text("Reminder noted."),
		llmtest.Text("Continuing."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{g.tool()}})
	done := start(o, msg("Do the long thing"))
	<-g.started
	if err := o.Pause(ctx, "u1", "c1"); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	if out := <-done; out.err != nil || out.res.Status != agent.StatusPaused {
		t.Fatalf("status %s, err %v; want paused", out.res.Status, out.err)
	}
	trig := msg("Event: calendar reminder fired")
	trig.Source = agent.SourceTrigger
	if _, err := o.HandleMessage(ctx, trig); err != nil {
		t.Fatal(err)
	}
	if _, err := o.HandleMessage(ctx, msg("Go on")); err != nil {
		t.Fatal(err)
	}
	has := func(i int) bool {
		for _, m := range s.Requests()[i].Messages {
			if strings.Contains(m.Content, "paused the previous request") {
				return true
			}
		}
		return false
	}
	if has(1) {
		t.Error("the triggered run was told to continue the user's paused task")
	}
	if !has(2) {
		t.Error("the user's next message after the pause did not get the resume note: the triggered run used it up")
	}
}
