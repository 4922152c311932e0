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
			store := pool.NewMemory()
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
