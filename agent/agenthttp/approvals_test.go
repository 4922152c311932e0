package agenthttp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/agenthttp"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/clock/clocktest"
	"github.com/valetkit/valet/llm/llmtest"
)

// draftEmail runs a message whose model drafts an email to team@, so an
// approval waits; it returns the request as listed.
func draftEmail(t *testing.T, e *env, tenant string) approval.Request {
	t.Helper()
	evs := e.post(tenant, "c1", "email the plan to the team").all()
	var state *agenthttp.Event
	for i := range evs {
		if evs[i].Type == "state_change" {
			state = &evs[i]
		}
	}
	if state == nil || state.State != "waiting_for_approval" || len(state.Approvals) != 1 || state.Approvals[0].Fingerprint == "" {
		t.Fatalf("events %v: want a state_change with the approval and its fingerprint, got %+v", types(evs), state)
	}
	if end := evs[len(evs)-1].Result; end.Status != "waiting_for_approval" || len(end.PendingApprovals) != 1 {
		t.Fatalf("result %+v", end)
	}
	list := listApprovals(t, e, tenant)
	if len(list) != 1 || list[0].ID != state.Approvals[0].ID || list[0].Fingerprint != state.Approvals[0].Fingerprint {
		t.Fatalf("GET /approvals %+v; the stream showed %+v", list, state.Approvals)
	}
	return list[0]
}

func listApprovals(t *testing.T, e *env, tenant string) []approval.Request {
	t.Helper()
	r := e.do(http.MethodGet, "/approvals", tenant, "")
	if r.status != http.StatusOK {
		t.Fatalf("GET /approvals: %d %s", r.status, r.body)
	}
	var b struct{ Approvals []approval.Request }
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || b.Approvals == nil {
		t.Fatalf("GET /approvals body %q (%v)", r.body, err)
	}
	return b.Approvals
}

func decide(e *env, tenant, id, body string) reply {
	return e.do(http.MethodPost, "/approvals/"+id, tenant, body)
}

func emailScript(t *testing.T, after ...llmtest.Reply) *llmtest.Script {
	return llmtest.NewStrictScript(t, append([]llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
	}, after...)...)
}

func TestApprovalIsListedAndApprovedByItsFingerprint(t *testing.T) {
	e := newEnv(t, emailScript(t, llmtest.Text("Sent to the team.")), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	r := decide(e, "ann", req.ID, fmt.Sprintf(`{"action":"approve","fingerprint":%q}`, req.Fingerprint))
	if r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	var b struct {
		Result agenthttp.Result
		Error  *agenthttp.Error
	}
	if err := json.Unmarshal([]byte(r.body), &b); err != nil || b.Error != nil {
		t.Fatalf("body %q (%v)", r.body, err)
	}
	if b.Result.Status != "completed" || b.Result.Response != "Sent to the team." {
		t.Fatalf("result %+v", b.Result)
	}
	if sent := e.outbox.list(); len(sent) != 1 || sent[0].To != "team@example.com" {
		t.Fatalf("sent %+v", sent)
	}
	if again := decide(e, "ann", req.ID, fmt.Sprintf(`{"action":"approve","fingerprint":%q}`, req.Fingerprint)); again.status != http.StatusNotFound {
		t.Fatalf("a second approval: %d %s", again.status, again.body)
	}
	if len(e.outbox.list()) != 1 || len(listApprovals(t, e, "ann")) != 0 {
		t.Fatal("the action ran twice, or the request is still listed")
	}
}

func TestApprovalEditedThenSent(t *testing.T) {
	e := newEnv(t, emailScript(t, llmtest.Text("Sent to you.")), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	r := decide(e, "ann", req.ID, fmt.Sprintf(`{"action":"edit","fields":{"to":"me@example.com"},"fingerprint":%q}`, req.Fingerprint))
	if r.status != http.StatusOK {
		t.Fatalf("edit: %d %s", r.status, r.body)
	}
	if sent := e.outbox.list(); len(sent) != 1 || sent[0].To != "me@example.com" || sent[0].Subject != "Plan" {
		t.Fatalf("sent %+v", sent)
	}
}

func TestApprovalCancelledRunsNothing(t *testing.T) {
	e := newEnv(t, emailScript(t, llmtest.Text("Not sent.")), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	r := decide(e, "ann", req.ID, fmt.Sprintf(`{"action":"cancel","reason":"not yet","fingerprint":%q}`, req.Fingerprint))
	if r.status != http.StatusOK || len(e.outbox.list()) != 0 {
		t.Fatalf("cancel: %d %s, sent %+v", r.status, r.body, e.outbox.list())
	}
}

func TestApprovalOfAnotherTenantIsNotFoundAndRunsNothing(t *testing.T) {
	e := newEnv(t, emailScript(t), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	if got := listApprovals(t, e, "bob"); len(got) != 0 {
		t.Fatalf("bob lists ann's approvals: %+v", got)
	}
	for _, action := range []string{"approve", "cancel"} {
		r := decide(e, "bob", req.ID, fmt.Sprintf(`{"action":%q,"fingerprint":%q}`, action, req.Fingerprint))
		if code, _ := r.errorOf(t); r.status != http.StatusNotFound || code != agenthttp.CodeNotFound {
			t.Fatalf("bob %ss ann's approval: %d %s", action, r.status, r.body)
		}
	}
	if len(e.outbox.list()) != 0 {
		t.Fatal("another tenant's decision ran the action")
	}
	if still := listApprovals(t, e, "ann"); len(still) != 1 || still[0].ID != req.ID {
		t.Fatalf("ann's approval after bob's attempts: %+v", still)
	}
}

func TestStaleFingerprintIsAConflictAndRunsNothing(t *testing.T) {
	e := newEnv(t, emailScript(t), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	r := decide(e, "ann", req.ID, `{"action":"approve","fingerprint":"00000000000000000000000000000000"}`)
	if code, _ := r.errorOf(t); r.status != http.StatusConflict || code != agenthttp.CodeStale {
		t.Fatalf("stale fingerprint: %d %s", r.status, r.body)
	}
	if len(e.outbox.list()) != 0 || len(listApprovals(t, e, "ann")) != 1 {
		t.Fatal("a stale decision ran the action or removed the request")
	}
}

func TestMalformedDecisionsAreRefusedAndRunNothing(t *testing.T) {
	e := newEnv(t, emailScript(t), agent.Config{}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	fp := req.Fingerprint
	for name, c := range map[string]struct {
		body   string
		status int
		code   string
	}{
		"no fingerprint":   {`{"action":"approve"}`, http.StatusBadRequest, agenthttp.CodeInvalidRequest},
		"unknown action":   {fmt.Sprintf(`{"action":"launch","fingerprint":%q}`, fp), http.StatusBadRequest, agenthttp.CodeInvalidRequest},
		"edit, no fields":  {fmt.Sprintf(`{"action":"edit","fingerprint":%q}`, fp), http.StatusBadRequest, agenthttp.CodeInvalidRequest},
		"edit, not object": {fmt.Sprintf(`{"action":"edit","fields":[1],"fingerprint":%q}`, fp), http.StatusBadRequest, agenthttp.CodeInvalidRequest},
		"unknown field":    {fmt.Sprintf(`{"action":"approve","fingerprint":%q,"force":true}`, fp), http.StatusBadRequest, agenthttp.CodeInvalidJSON},
		"not JSON":         {`approve`, http.StatusBadRequest, agenthttp.CodeInvalidJSON},
	} {
		t.Run(name, func(t *testing.T) {
			r := decide(e, "ann", req.ID, c.body)
			if code, _ := r.errorOf(t); r.status != c.status || code != c.code {
				t.Fatalf("%d %s; want %d %s", r.status, r.body, c.status, c.code)
			}
		})
	}
	if len(e.outbox.list()) != 0 || len(listApprovals(t, e, "ann")) != 1 {
		t.Fatal("a malformed decision ran the action or removed the request")
	}
}

func TestApprovalsFilterByConversation(t *testing.T) {
	e := newEnv(t, emailScript(t), agent.Config{}, agenthttp.Config{})
	draftEmail(t, e, "ann")
	for conv, want := range map[string]int{"c1": 1, "c2": 0} {
		r := e.do(http.MethodGet, "/approvals?conversation="+conv, "ann", "")
		var b struct{ Approvals []approval.Request }
		if err := json.Unmarshal([]byte(r.body), &b); err != nil || len(b.Approvals) != want {
			t.Fatalf("conversation %s: %s", conv, r.body)
		}
	}
}

func TestExpiredApprovalIsGoneAndRunsNothing(t *testing.T) {
	clk := clocktest.New(time.Date(2026, 6, 1, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, emailScript(t), agent.Config{Clock: clk, Loop: agent.LoopConfig{ApprovalTimeout: time.Minute}}, agenthttp.Config{})
	req := draftEmail(t, e, "ann")
	clk.Advance(2 * time.Minute)
	r := decide(e, "ann", req.ID, fmt.Sprintf(`{"action":"approve","fingerprint":%q}`, req.Fingerprint))
	if code, _ := r.errorOf(t); r.status != http.StatusGone || code != agenthttp.CodeExpired {
		t.Fatalf("an expired approval: %d %s", r.status, r.body)
	}
	if len(e.outbox.list()) != 0 {
		t.Fatal("an expired approval ran")
	}
}
