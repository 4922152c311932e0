package agent_test

import (
	"context"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool"
)

// Until this change a Message without ConversationID parked its agents
// under ConversationID "" (and locked "conv:<n>:<tenant>:"); now the same
// conversation is "default". Entries a previous release left in a shared
// pool (pool/redispool survives the deploy, which is its point) are listed
// by PendingAgents and ListPendingApprovals but never served by the
// conversation's messages: the user's "yes" goes to the model as if
// nothing were pending, and the approval expires unexecuted. servePending
// and collectPending compare e.ConversationID with the normalised ID
// without normalising the entry's.
func TestPreUpgradeEntryOfDefaultConversationIsNeverServed(t *testing.T) {
	ctx := context.Background()
	store := newPool(t, pool.MemoryConfig{})
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sent."),
	}}
	email := &emailAgent{}
	s := rt.script(t)
	o := agentsOrch(t, s, agent.Config{Pool: store}, email, &noteAgent{})
	noConv := agent.Message{TenantID: "u1", Text: "mail the team"}
	if _, err := o.HandleMessage(ctx, noConv); err != nil {
		t.Fatal(err)
	}
	// What the previous release stored for the same message.
	entries, err := store.List(ctx, "u1")
	if err != nil || len(entries) != 1 {
		t.Fatalf("pool: %v, %v", entries, err)
	}
	e := entries[0]
	e.ConversationID = ""
	if err := store.Update(ctx, e); err != nil {
		t.Fatal(err)
	}
	if list, _ := o.ListPendingApprovals(ctx, "u1"); len(list) != 1 {
		t.Fatalf("ListPendingApprovals = %v", list)
	}
	noConv.Text = "yes"
	if _, err := o.HandleMessage(ctx, noConv); err != nil {
		t.Fatal(err)
	}
	if sent := email.Sent(); len(sent) != 1 {
		t.Fatalf("the user approved the pending e-mail of their default conversation; sent %d", len(sent))
	}
}
