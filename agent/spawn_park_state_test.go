package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/credentials"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// A credential value a sub-agent's tool read from the store does not land
// in clear in the parked sub-agent's state (Entry.SubAgent, which a Redis
// pool stores), nor in what the user is shown.
func TestParkedSubAgentStateHoldsNoCredentialValue(t *testing.T) {
	const secret = "xoxb-Sup3rS3cretT0ken-9981"
	ctx := context.Background()
	store := credentials.NewMemory()
	if err := store.Save(ctx, "u1", "slack", "", map[string]any{"token": secret}); err != nil {
		t.Fatal(err)
	}
	slack := tool.New("slack_lookup", "Looks the team up in Slack", func(ctx context.Context, in EchoIn) (string, error) {
		ec := tool.ExecContextFrom(ctx)
		sec, err := ec.Credentials.Get(ctx, ec.TenantID, "slack", "")
		if err != nil {
			return "", err
		}
		b, _ := json.Marshal(sec)
		return "team: team@example.com (looked up with " + string(b) + ")", nil
	})
	shared := newPool(t, pool.MemoryConfig{})
	email := &emailAgent{}
	s := &subScript{t: t, coord: coordinator("Email the team.")}
	s.worker = func(task string, req llm.Request) llmtest.Reply {
		rs := toolResults(req)
		switch {
		case rs["e1"].Content != "":
			return llmtest.Text("Worker: " + rs["e1"].Content)
		case rs["l1"].Content != "":
			return llmtest.Calls(llm.ToolCall{ID: "e1", Name: "send_email", Arguments: json.RawMessage(`{"to":"team@example.com","subject":"Plan"}`)})
		}
		return llmtest.Calls(llm.ToolCall{ID: "l1", Name: "slack_lookup", Arguments: json.RawMessage(`{"q":"team"}`)})
	}
	o := subOrch(t, s, agent.Config{Pool: shared, Credentials: store, Tools: []tool.Tool{slack}}, email)
	res, err := o.HandleMessage(ctx, msg("Tell the team."))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.PendingApprovals) != 1 {
		t.Fatalf("approvals %+v", res.PendingApprovals)
	}
	e, err := shared.Get(ctx, "u1", res.PendingApprovals[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(e)
	if !strings.Contains(string(e.SubAgent), "looked up with") {
		t.Fatalf("the lookup result is not in the parked state: %s", e.SubAgent)
	}
	if strings.Contains(string(raw), "Sup3rS3cret") {
		t.Fatalf("the parked entry holds the credential in clear: %s", e.SubAgent)
	}
	if strings.Contains(res.Response, "Sup3rS3cret") || strings.Contains(approval.Present(res.PendingApprovals), "Sup3rS3cret") {
		t.Fatalf("the user is shown the credential: %q", res.Response)
	}
}
