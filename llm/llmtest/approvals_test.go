package llmtest_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// pendingThree are three approvals as the orchestrator passes them to
// approval.Resolve; the third may be edited.
var pendingThree = []approval.Request{
	{ID: "agt_b7", AgentName: "send_email", ActionSummary: "Send an email to team@example.com"},
	{ID: "agt_a1", AgentName: "book_flight", ActionSummary: "Book a flight to Oslo"},
	{ID: "agt_c3", AgentName: "send_email", ActionSummary: "Send an email to boss@example.com", AllowModification: true},
}

// resolveRequest is the approval call for pending, with the tool exactly as
// the approval package builds it.
func resolveRequest(pending []approval.Request) llm.Request {
	editable := map[string]json.RawMessage{}
	for _, r := range pending {
		if r.AllowModification {
			editable[r.ID] = json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}}}`)
		}
	}
	return llm.Request{
		Messages:   []llm.Message{llm.UserMessage("send the first, not the second, the third to me")},
		Tools:      []llm.ToolSpec{approval.ResolveTool(pending, editable)},
		ToolChoice: approval.ResolveToolName,
	}
}

// answer plays reply against req and returns the resolve call it made.
func answer(t *testing.T, reply llmtest.Reply, req llm.Request) llm.ToolCall {
	t.Helper()
	s := llmtest.NewStrictScript(t, reply)
	resp, err := s.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("tool calls = %+v", resp.Message.ToolCalls)
	}
	return resp.Message.ToolCalls[0]
}

func TestDecideAnswersByPosition(t *testing.T) {
	req := resolveRequest(pendingThree)
	call := answer(t, llmtest.Decide(
		llmtest.Approve(0),
		llmtest.Cancel(1).Because("too expensive"),
		llmtest.Edit(2, `{ "to": "me@example.com" }`),
	), req)
	if call.Name != approval.ResolveToolName {
		t.Fatalf("called %q", call.Name)
	}
	// What the approval package reads from it.
	decided, ignored, err := approval.ParseDecisions(call.Arguments, pendingThree)
	if err != nil || len(ignored) != 0 {
		t.Fatalf("ParseDecisions: %v, ignored %v", err, ignored)
	}
	want := []approval.Decided{
		{ID: "agt_b7", Decision: approval.Decision{Action: approval.Approve}},
		{ID: "agt_a1", Decision: approval.Decision{Action: approval.Cancel, Reason: "too expensive"}},
		{ID: "agt_c3", Decision: approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{"to":"me@example.com"}`)}},
	}
	if len(decided) != len(want) {
		t.Fatalf("decided = %+v", decided)
	}
	for i := range want {
		g, w := decided[i], want[i]
		if g.ID != w.ID || g.Decision.Action != w.Decision.Action || g.Decision.Reason != w.Decision.Reason || string(g.Decision.Fields) != string(w.Decision.Fields) {
			t.Errorf("decision %d = %+v, want %+v", i, g, w)
		}
	}

	// The order of the decisions is kept: it is the order approved actions run in.
	call = answer(t, llmtest.Decide(llmtest.Cancel(2), llmtest.Approve(0)), req)
	if got := string(call.Arguments); got != `{"decisions":[{"id":"agt_c3","action":"cancel"},{"id":"agt_b7","action":"approve"}]}` {
		t.Errorf("arguments = %s", got)
	}
	// Edit takes a value as well as JSON text.
	call = answer(t, llmtest.Decide(llmtest.Edit(2, map[string]string{"to": "x@example.com"})), req)
	if got := string(call.Arguments); got != `{"decisions":[{"id":"agt_c3","action":"edit","fields":{"to":"x@example.com"}}]}` {
		t.Errorf("arguments = %s", got)
	}
	// No decision: the message decided nothing.
	call = answer(t, llmtest.Decide(), req)
	if got := string(call.Arguments); got != `{"decisions":[]}` {
		t.Errorf("arguments = %s", got)
	}
}

func TestApproveAllAndCancelAll(t *testing.T) {
	req := resolveRequest(pendingThree)
	for _, tt := range []struct {
		reply  llmtest.Reply
		action approval.Action
	}{{llmtest.ApproveAll(), approval.Approve}, {llmtest.CancelAll(), approval.Cancel}} {
		decided, ignored, err := approval.ParseDecisions(answer(t, tt.reply, req).Arguments, pendingThree)
		if err != nil || len(ignored) != 0 || len(decided) != 3 {
			t.Fatalf("%v %v %+v", err, ignored, decided)
		}
		for i, d := range decided {
			if d.ID != pendingThree[i].ID || d.Decision.Action != tt.action {
				t.Errorf("decision %d = %+v, want %s of %s", i, d, tt.action, pendingThree[i].ID)
			}
		}
	}
}

// The ids are read from the tool's description when its schema has no enum
// (an older or hand-made tool).
func TestDecideReadsIDsFromTheDescription(t *testing.T) {
	req := resolveRequest(pendingThree)
	req.Tools[0].Parameters = json.RawMessage(`{"type":"object"}`)
	call := answer(t, llmtest.Decide(llmtest.Approve(1), llmtest.Cancel(2)), req)
	if got := string(call.Arguments); got != `{"decisions":[{"id":"agt_a1","action":"approve"},{"id":"agt_c3","action":"cancel"}]}` {
		t.Errorf("arguments = %s", got)
	}
}

func TestReplyMismatchFailsLoudly(t *testing.T) {
	weather := llm.ToolSpec{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)}
	loop := llm.Request{Messages: []llm.Message{llm.UserMessage("yes")}, Tools: []llm.ToolSpec{weather}}
	resolve := resolveRequest(pendingThree)
	extract := llm.Request{
		Messages:   []llm.Message{llm.UserMessage("Paris")},
		Tools:      []llm.ToolSpec{{Name: agent.ProvideFieldsToolName, Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"unrelated":{"type":"boolean"}}}`)}},
		ToolChoice: agent.ProvideFieldsToolName,
	}
	tests := []struct {
		name  string
		reply llmtest.Reply
		req   llm.Request
		want  string
	}{
		{"no approval pending", llmtest.Decide(llmtest.Approve(0)), loop,
			"call 1: Decide(Approve(0)): the request has no resolve_approvals tool, so no approval is pending (its tools: get_weather)"},
		{"ApproveAll without approvals", llmtest.ApproveAll(), llm.Request{},
			"ApproveAll(): the request has no resolve_approvals tool, so no approval is pending (it has no tools)"},
		{"out of range", llmtest.Decide(llmtest.Approve(0), llmtest.Cancel(3)), resolve,
			"Cancel(3): no approval at position 3; 3 approvals are pending, at positions 0 to 2"},
		{"negative", llmtest.Decide(llmtest.Approve(-1)), resolve, "Approve(-1): no approval at position -1"},
		{"one pending", llmtest.Decide(llmtest.Approve(1)), resolveRequest(pendingThree[:1]),
			"Approve(1): no approval at position 1; 1 approval is pending, at position 0"},
		{"twice", llmtest.Decide(llmtest.Approve(1), llmtest.Cancel(1)), resolve, "Approve(1) and Cancel(1) decide the same approval"},
		{"edit not an object", llmtest.Decide(llmtest.Edit(2, `"me"`)), resolve, "Edit(2): fields must be a non-empty JSON object"},
		{"edit empty", llmtest.Decide(llmtest.Edit(2, nil)), resolve, "Edit(2): fields must be a non-empty JSON object: no field changed"},
		{"zero decision", llmtest.Decide(llmtest.Decision{}), resolve, "Decision(0): not made with Approve, Edit or Cancel"},
		{"no input pending", llmtest.ProvideFields(`{"city":"Paris"}`), resolve,
			`ProvideFields: the request has no provide_fields tool, so no agent waits for input (its tools: resolve_approvals; tool choice "resolve_approvals")`},
		{"unknown field", llmtest.ProvideFields(`{"cty":"Paris"}`), extract,
			`ProvideFields: the waiting agent has no field "cty" (its fields: city, unrelated)`},
		{"fields not an object", llmtest.ProvideFields(`["Paris"]`), extract, "ProvideFields: fields must be a JSON object"},
		{"Unrelated without input", llmtest.Unrelated(), loop, "Unrelated: the request has no provide_fields tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := llmtest.NewScript(tt.reply)
			_, err := s.Complete(t.Context(), tt.req)
			if !errors.Is(err, llmtest.ErrReplyMismatch) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant ErrReplyMismatch containing %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "llmtest: reply does not fit the request: call 1: ") {
				t.Errorf("err = %v: want the sentinel and the call's number first", err)
			}
			// Recorded, so that a strict script reports it even when the
			// bot swallowed the error.
			if rec := s.Err(); rec == nil || rec.Error() != err.Error() {
				t.Errorf("Err() = %v", rec)
			}
			// Streamed the same.
			s.Reset()
			if _, err := llm.Collect(s.Stream(t.Context(), tt.req)); !errors.Is(err, llmtest.ErrReplyMismatch) {
				t.Errorf("stream err = %v", err)
			}
		})
	}
}

func TestProvideFields(t *testing.T) {
	extract := llm.Request{
		Messages:   []llm.Message{llm.UserMessage("Paris, on Tuesday")},
		Tools:      []llm.ToolSpec{{Name: agent.ProvideFieldsToolName, Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"},"day":{"type":"string"},"unrelated":{"type":"boolean"}}}`)}},
		ToolChoice: agent.ProvideFieldsToolName,
	}
	for _, tt := range []struct {
		reply llmtest.Reply
		want  string
	}{
		{llmtest.ProvideFields(`{"city": "Paris", "day": "Tuesday"}`), `{"city":"Paris","day":"Tuesday"}`},
		{llmtest.ProvideFields(map[string]string{"city": "Paris"}), `{"city":"Paris"}`},
		{llmtest.Unrelated(), `{"unrelated":true}`},
	} {
		call := answer(t, tt.reply, extract)
		if call.Name != agent.ProvideFieldsToolName || string(call.Arguments) != tt.want {
			t.Errorf("call = %s %s, want %s", call.Name, call.Arguments, tt.want)
		}
	}
}

// A reply made from its request also works from a NewScriptFunc router.
func TestDecideFromAScriptFunc(t *testing.T) {
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if req.ToolChoice == approval.ResolveToolName {
			return llmtest.Decide(llmtest.Cancel(1))
		}
		return llmtest.Decide(llmtest.Approve(0)) // a mistake: no approval is pending
	}).Strict(t)
	resp, err := s.Complete(t.Context(), resolveRequest(pendingThree))
	if err != nil || string(resp.Message.ToolCalls[0].Arguments) != `{"decisions":[{"id":"agt_a1","action":"cancel"}]}` {
		t.Fatalf("%+v %v", resp, err)
	}
	_, err = s.Complete(t.Context(), llm.Request{})
	if !errors.Is(err, llmtest.ErrReplyMismatch) || !strings.Contains(err.Error(), "call 2: Decide(Approve(0))") {
		t.Fatalf("err = %v", err)
	}
	s.Reset() // the mistake was the point of this test: forget it
}
