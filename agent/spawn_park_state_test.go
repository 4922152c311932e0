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

// A token a sub-agent's tool returned (not from the credential store: an
// API echoing its Authorization header) is not stored in clear in the
// parked sub-agent's state, which lands in the pool (Redis): sub-agents
// keep no history, so their tool results were never persisted before.
func TestParkedSubAgentStateHoldsNoTokenFromAToolResult(t *testing.T) {
	const token = "ghp_R8xK2mQ7vL4nT9wZ1cB5yH3jF6dS0aP2eU8i"
	leaked := "connected to the CRM; request headers: Authorization: Bearer " + token
	if agent.RedactText(leaked) == leaked {
		t.Fatal("RedactText does not know this token's shape; pick another")
	}
	ctx := context.Background()
	crm := tool.New("crm_lookup", "Looks the team up in the CRM", func(context.Context, EchoIn) (string, error) {
		return leaked, nil
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
		// The model copies the token into a call's arguments too.
		return llmtest.Calls(llm.ToolCall{ID: "l1", Name: "crm_lookup", Arguments: json.RawMessage(`{"q":"team, token ` + token + `"}`)})
	}
	o := subOrch(t, s, agent.Config{Pool: shared, Tools: []tool.Tool{crm}}, email)
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
	if !strings.Contains(string(e.SubAgent), "connected to the CRM") {
		t.Fatalf("the lookup result is not in the parked state: %s", e.SubAgent)
	}
	if strings.Contains(string(e.SubAgent), token) {
		t.Fatalf("the parked sub-agent state holds the token in clear: %s", e.SubAgent)
	}
	// Resumed, the sub-agent goes on from the masked window, and the
	// approved action runs once.
	if _, err := o.ResolveApproval(ctx, "u1", e.ID, approval.Decision{Action: approval.Approve}); err != nil {
		t.Fatal(err)
	}
	if n := len(email.Sent()); n != 1 {
		t.Fatalf("sent %d", n)
	}
	wr := s.workerRequests("Email the team.")
	last := wr[len(wr)-1]
	if err := llm.CheckPairing(last.Messages); err != nil {
		t.Fatal(err)
	}
	for _, m := range last.Messages {
		for _, c := range m.ToolCalls {
			if !json.Valid(c.Arguments) {
				t.Fatalf("the resumed window holds invalid arguments %q", c.Arguments)
			}
		}
		if strings.Contains(m.Content, token) {
			t.Fatalf("the resumed sub-agent was sent the token: %q", m.Content)
		}
	}
}

// A sub-agent's entry whose state is malformed or from another format
// (written with the pool API, as an old or corrupted record) is refused:
// ErrStaleAgent or another error, never a panic, and nothing runs.
func TestMalformedSubAgentStateRunsNothing(t *testing.T) {
	window := func(msgs ...string) string { return "[" + strings.Join(msgs, ",") + "]" }
	user := `{"role":"user","content":"Email the team."}`
	call := `{"role":"assistant","tool_calls":[{"id":"e1","name":"send_email","arguments":{}}]}`
	tool := `{"role":"tool","tool_call_id":"e1","name":"send_email","content":"waits"}`
	level := func(v int, depth int, path, win string) string {
		return `[{"v":` + itoa(v) + `,"call_id":"sp1","args":{"task":"Email the team."},"depth":` + itoa(depth) +
			`,"path":` + path + `,"window":` + win + `,"waiting":"e1"}]`
	}
	cases := map[string]string{
		"not json":          `{"v":`,
		"object":            `{"v":1}`,
		"null":              `null`,
		"empty":             `[]`,
		"future version":    level(2, 1, `["sp1"]`, window(user, call, tool)),
		"depth 0":           level(1, 0, `[]`, window(user, call, tool)),
		"too deep":          level(1, 3, `["a","b","c"]`, window(user, call, tool)),
		"no waiting result": level(1, 1, `["sp1"]`, window(user, call)),
		// The waiting result has no call before it: resuming it would send
		// the model an unpaired tool result.
		"result without its call": level(1, 1, `["sp1"]`, window(user, tool)),
		"result first":            level(1, 1, `["sp1"]`, window(tool)),
	}
	for name, state := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			shared := newPool(t, pool.MemoryConfig{})
			email := &emailAgent{}
			s := &subScript{t: t, coord: coordinator("Email the team."), worker: emailingWorker(`{"to":"team@example.com","subject":"Plan"}`)}
			o := subOrch(t, s, agent.Config{Pool: shared}, email)
			res, err := o.HandleMessage(ctx, msg("Tell the team."))
			if err != nil {
				t.Fatal(err)
			}
			id := res.PendingApprovals[0].ID
			e, err := shared.Get(ctx, "u1", id)
			if err != nil {
				t.Fatal(err)
			}
			e.SubAgent = json.RawMessage(state)
			if err := shared.Update(ctx, e); err != nil {
				return // the pool refuses it: nothing to decide
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("ResolveApproval panicked: %v", p)
					}
				}()
				_, err = o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve})
			}()
			if n := len(email.Sent()); n != 0 {
				t.Fatalf("the action ran %d time(s) from a malformed sub-agent state (err %v)", n, err)
			}
			if err == nil {
				t.Fatal("the decision succeeded; want ErrStaleAgent or an error")
			}
		})
	}
}
