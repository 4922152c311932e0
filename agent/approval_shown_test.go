package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool"
)

// An action changed after the user saw it is not approved by the user's
// next bare "yes" unless the reply before showed the user its current
// version: a chat decision found stale shows the changed action in the
// reply (phrased by the model or the agents' own prompt), and only then
// does it count as shown.
func TestStaleChatDecisionShowsTheChangedActionBeforeAYesRunsIt(t *testing.T) {
	for _, direct := range []bool{false, true} {
		name := "phrased"
		if direct {
			name = "direct"
		}
		t.Run(name, func(t *testing.T) {
			rt := &router{loop: []llmtest.Reply{
				llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
				llmtest.Text("Okay."),
				llmtest.Text("Done."),
			}}
			email := &emailAgent{}
			store := newPool(t, pool.MemoryConfig{})
			o := agentsOrch(t, rt.script(t), agent.Config{Pool: store, Loop: agent.LoopConfig{DirectAgentPrompts: direct}}, email, &noteAgent{})
			ctx := context.Background()
			first, err := o.HandleMessage(ctx, msg("mail the team"))
			if err != nil || len(first.PendingApprovals) != 1 {
				t.Fatalf("res=%+v err=%v", first, err)
			}
			// Another writer changes the draft after the user saw it.
			e, err := store.Get(ctx, "u1", first.PendingApprovals[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			e.Fields = json.RawMessage(`{"to":"everyone@example.com","subject":"Plan"}`)
			if err := store.Update(ctx, e); err != nil {
				t.Fatal(err)
			}
			shown := first.Response
			for i, reply := range []string{"yes", "yes"} {
				res, err := o.HandleMessage(ctx, msg(reply))
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range email.Sent() {
					if !strings.Contains(shown, m.To) {
						t.Fatalf("reply %d (%q) sent the email to %s, which no reply showed the user; they were shown:\n%s", i+1, reply, m.To, shown)
					}
				}
				if i == 0 && (len(email.Sent()) != 0 || res.Status != agent.StatusWaitingForApproval) {
					t.Fatalf("the stale decision: res=%+v sent=%+v", res, email.Sent())
				}
				shown += "\n" + res.Response
			}
			if sent := email.Sent(); len(sent) != 1 || sent[0].To != "everyone@example.com" {
				t.Fatalf("after the changed action was shown, a yes must send it once: sent %+v", sent)
			}
		})
	}
}

// A triggered run's reply is the task's result, which goes along the
// task's route (a memory_update route, a chained task), not to the user:
// when it lists an approval whose action changed since the user saw it,
// that version is not recorded as shown, and the user's next bare "yes"
// in chat does not approve it.
func TestTriggeredReplyDoesNotCountAsShowingAChangedApproval(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		// The triggered run starts a note that waits for its day.
		llmtest.Calls(llmtest.Call("save_note", `{"title":"Plan"}`)),
		llmtest.Text("Done."),
		llmtest.Text("Done."),
	}}
	email := &emailAgent{}
	store := newPool(t, pool.MemoryConfig{})
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: store}, email, &noteAgent{})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("mail the team"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("res=%+v err=%v", first, err)
	}
	e, err := store.Get(ctx, "u1", first.PendingApprovals[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	e.Fields = json.RawMessage(`{"to":"everyone@example.com","subject":"Plan"}`)
	if err := store.Update(ctx, e); err != nil {
		t.Fatal(err)
	}
	trig := msg("[Scheduled Task] Plan the week.")
	trig.Source, trig.TaskID = agent.SourceTrigger, "t1"
	if _, err := o.HandleMessage(ctx, trig); err != nil {
		t.Fatal(err)
	}
	res, err := o.HandleMessage(ctx, msg("yes"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range email.Sent() {
		if !strings.Contains(first.Response, m.To) {
			t.Fatalf("a bare yes sent the email to %s, which only a triggered run's result listed; the user was shown:\n%s\nreply: %s",
				m.To, first.Response, res.Response)
		}
	}
}
