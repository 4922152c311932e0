package approval_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	sjson "github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// threePending: an email that may be edited, a flight that may not, a payment.
func threePending() []approval.Request {
	return []approval.Request{
		{ID: "r1", AgentName: "send_email", ActionSummary: "Send an email to team@example.com",
			Details: map[string]any{"to": "team@example.com"}, AllowModification: true},
		{ID: "r2", AgentName: "book_flight", ActionSummary: "Book LH 123 to Berlin"},
		{ID: "r3", AgentName: "pay_invoice", ActionSummary: "Pay invoice 42 (120 EUR)"},
	}
}

func onePending() []approval.Request { return threePending()[:1] }

// resolveCall is a scripted resolve_approvals call.
func resolveCall(args string) llmtest.Reply {
	return llmtest.Calls(llmtest.Call(approval.ResolveToolName, args))
}

func decodeSchema(t *testing.T, spec llm.ToolSpec) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(spec.Parameters, &m); err != nil {
		t.Fatalf("parameters are not JSON: %v\n%s", err, spec.Parameters)
	}
	return m
}

func TestResolveToolSchema(t *testing.T) {
	pending := append(threePending(), approval.Request{ID: "r1", ActionSummary: "a duplicate id"})
	editable := map[string]json.RawMessage{
		"r1": json.RawMessage(`{"type": "object",
			"properties": {"to": {"type": "string", "format": "email"}}}`),
		"r2": json.RawMessage(`{"type":"object","properties":{"seat":{"type":"string"}}}`), // r2 may not be edited
	}
	spec := approval.ResolveTool(pending, editable)
	if spec.Name != "resolve_approvals" {
		t.Fatalf("Name = %q", spec.Name)
	}

	m := decodeSchema(t, spec)
	if m["type"] != "object" || m["additionalProperties"] != false {
		t.Errorf("top level: type %v, additionalProperties %v; want object, false", m["type"], m["additionalProperties"])
	}
	if req, _ := m["required"].([]any); len(req) != 1 || req[0] != "decisions" {
		t.Errorf("required = %v, want [decisions]", m["required"])
	}
	decisions := m["properties"].(map[string]any)["decisions"].(map[string]any)
	if decisions["type"] != "array" {
		t.Errorf("decisions type = %v", decisions["type"])
	}
	items := decisions["items"].(map[string]any)
	props := items["properties"].(map[string]any)
	var ids, actions []string
	for _, v := range props["id"].(map[string]any)["enum"].([]any) {
		ids = append(ids, v.(string))
	}
	for _, v := range props["action"].(map[string]any)["enum"].([]any) {
		actions = append(actions, v.(string))
	}
	if !slices.Equal(ids, []string{"r1", "r2", "r3"}) {
		t.Errorf("id enum = %v, want the pending ids once each", ids)
	}
	if !slices.Equal(actions, []string{"approve", "edit", "cancel"}) {
		t.Errorf("action enum = %v", actions)
	}
	if props["fields"].(map[string]any)["type"] != "object" || props["reason"].(map[string]any)["type"] != "string" {
		t.Errorf("fields / reason types wrong: %v", props)
	}

	for _, want := range []string{
		`id "r1": Send an email to team@example.com (send_email); actions: approve, edit or cancel; editable fields (JSON Schema): {"type":"object","properties":{"to":{"type":"string","format":"email"}}}`,
		`id "r2": Book LH 123 to Berlin (book_flight); actions: approve or cancel; cannot be edited`,
		`id "r3": Pay invoice 42 (120 EUR) (pay_invoice)`,
		"empty decisions list",
		"only when the user agrees to the action with changes",
		"only the changed fields",
		"Leave out every action the reply does not clearly decide",
	} {
		if !strings.Contains(spec.Description, want) {
			t.Errorf("description lacks %q:\n%s", want, spec.Description)
		}
	}
	if strings.Contains(spec.Description, "seat") {
		t.Error("description offers editable fields of a request that may not be edited")
	}

	// The schema is a valid JSON Schema that accepts what the model should
	// send and rejects ids that are not pending.
	sch, err := sjson.CompileString("resolve.json", string(spec.Parameters))
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}
	for _, tc := range []struct {
		args string
		ok   bool
	}{
		{`{"decisions":[]}`, true},
		{`{"decisions":[{"id":"r1","action":"edit","fields":{"to":"me@example.com"}},{"id":"r3","action":"cancel","reason":"too dear"}]}`, true},
		{`{"decisions":[{"id":"r9","action":"approve"}]}`, false},
		{`{"decisions":[{"id":"r1","action":"maybe"}]}`, false},
		{`{"decisions":[{"id":"r1"}]}`, false},
		{`{}`, false},
		{`{"decisions":[],"extra":1}`, false},
	} {
		var v any
		_ = json.Unmarshal([]byte(tc.args), &v)
		if err := sch.Validate(v); (err == nil) != tc.ok {
			t.Errorf("validate %s: %v, want ok=%v", tc.args, err, tc.ok)
		}
	}
}

func TestResolveToolNoPending(t *testing.T) {
	spec := approval.ResolveTool(nil, nil)
	m := decodeSchema(t, spec)
	id := m["properties"].(map[string]any)["decisions"].(map[string]any)["items"].(map[string]any)["properties"].(map[string]any)["id"].(map[string]any)
	if _, has := id["enum"]; has {
		t.Errorf("an empty enum is not a valid schema: %v", id)
	}
	if _, err := sjson.CompileString("resolve.json", string(spec.Parameters)); err != nil {
		t.Fatal(err)
	}
}

func TestParseDecisions(t *testing.T) {
	pending := append(threePending(), approval.Request{ID: "r4", ActionSummary: "Approve only", Options: []string{"cancel"}})
	type want struct {
		id     string
		action approval.Action
		fields string
		reason string
	}
	for _, tc := range []struct {
		name    string
		args    string
		want    []want
		ignored []string
	}{
		{
			name: "model order kept",
			args: `{"decisions":[{"id":"r3","action":"approve"},{"id":"r1","action":"cancel","reason":" not now "},{"id":"r2","action":"approve"}]}`,
			want: []want{{"r3", approval.Approve, "", ""}, {"r1", approval.Cancel, "", "not now"}, {"r2", approval.Approve, "", ""}},
		},
		{
			name: "edit with fields",
			args: `{"decisions":[{"id":"r1","action":"edit","fields": { "to" : "me@example.com",
				"cc": ["a", "b"] } }]}`,
			want: []want{{"r1", approval.Edit, `{"to":"me@example.com","cc":["a","b"]}`, ""}},
		},
		{
			name: "fields dropped from approve and cancel",
			args: `{"decisions":[{"id":"r1","action":"approve","fields":{"to":"x"}},{"id":"r3","action":"cancel","fields":{"a":1}}]}`,
			want: []want{{"r1", approval.Approve, "", ""}, {"r3", approval.Cancel, "", ""}},
		},
		{
			name:    "unknown ids dropped",
			args:    `{"decisions":[{"id":"r9","action":"approve"},{"id":"r2","action":"approve"},{"action":"approve"}]}`,
			want:    []want{{"r2", approval.Approve, "", ""}},
			ignored: []string{"r9: not a pending request", "(no id): not a pending request"},
		},
		{
			name:    "duplicate ids keep the first",
			args:    `{"decisions":[{"id":"r3","action":"cancel"},{"id":"r1","action":"approve"},{"id":"r3","action":"approve"}]}`,
			want:    []want{{"r3", approval.Cancel, "", ""}, {"r1", approval.Approve, "", ""}},
			ignored: []string{"r3: decided twice, the first decision was kept"},
		},
		{
			name:    "edit not allowed",
			args:    `{"decisions":[{"id":"r2","action":"edit","fields":{"seat":"12A"}},{"id":"r3","action":"approve"}]}`,
			want:    []want{{"r3", approval.Approve, "", ""}},
			ignored: []string{"r2: edit is not allowed for this request"},
		},
		{
			name:    "edit not allowed does not use up the id",
			args:    `{"decisions":[{"id":"r2","action":"edit","fields":{"seat":"12A"}},{"id":"r2","action":"cancel"}]}`,
			want:    []want{{"r2", approval.Cancel, "", ""}},
			ignored: []string{"r2: edit is not allowed for this request"},
		},
		{
			name:    "action outside Options",
			args:    `{"decisions":[{"id":"r4","action":"approve"}]}`,
			ignored: []string{"r4: approve is not allowed for this request"},
		},
		{
			name: "edit without fields",
			args: `{"decisions":[{"id":"r1","action":"edit"},{"id":"r1","action":"edit","fields":{}},{"id":"r1","action":"edit","fields":null},{"id":"r1","action":"edit","fields":"to me"}]}`,
			ignored: []string{
				"r1: edit without changed fields", "r1: edit without changed fields",
				"r1: edit without changed fields", "r1: edit without changed fields",
			},
		},
		{
			name:    "unknown action",
			args:    `{"decisions":[{"id":"r1","action":"maybe"},{"id":"r2","action":"Approve"}]}`,
			ignored: []string{`r1: unknown action "maybe"`, `r2: unknown action "Approve"`},
		},
		{
			name:    "a malformed entry does not spoil the others",
			args:    `{"decisions":[{"id":7,"action":"approve"},"r1",{"id":"r3","action":"approve"}]}`,
			want:    []want{{"r3", approval.Approve, "", ""}},
			ignored: []string{"(entry 1): malformed", "(entry 2): malformed"},
		},
		{name: "empty list", args: `{"decisions":[]}`},
		{name: "missing list", args: `{}`},
		{name: "null list", args: `{"decisions":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decided, ignored, err := approval.ParseDecisions(json.RawMessage(tc.args), pending)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if len(decided) != len(tc.want) {
				t.Fatalf("decided = %+v, want %+v", decided, tc.want)
			}
			for i, w := range tc.want {
				d := decided[i]
				if d.ID != w.id || d.Decision.Action != w.action || string(d.Decision.Fields) != w.fields || d.Decision.Reason != w.reason {
					t.Errorf("decided[%d] = %s %s fields=%s reason=%q; want %+v", i, d.ID, d.Decision.Action, d.Decision.Fields, d.Decision.Reason, w)
				}
				if err := d.Decision.Check(); err != nil {
					t.Errorf("decided[%d] does not pass Check: %v", i, err)
				}
			}
			if len(ignored) != len(tc.ignored) {
				t.Fatalf("ignored = %q, want %q", ignored, tc.ignored)
			}
			for i := range ignored {
				if !strings.HasPrefix(ignored[i], tc.ignored[i]) {
					t.Errorf("ignored[%d] = %q, want it to start with %q", i, ignored[i], tc.ignored[i])
				}
			}
		})
	}
}

func TestParseDecisionsMalformed(t *testing.T) {
	for _, args := range []string{``, `not json`, `[]`, `"decisions"`, `{"decisions":{"id":"r1"}}`, `{"decisions":[{"id":"r1","action":"approve"}]`, `null`} {
		decided, _, err := approval.ParseDecisions(json.RawMessage(args), threePending())
		if args == `null` {
			// JSON null decodes as an empty object: nothing decided, no error.
			if err != nil || len(decided) != 0 {
				t.Errorf("ParseDecisions(null) = %v, %v", decided, err)
			}
			continue
		}
		if !errors.Is(err, approval.ErrInvalidDecision) {
			t.Errorf("ParseDecisions(%q) err = %v, want ErrInvalidDecision", args, err)
		}
		if len(decided) != 0 {
			t.Errorf("ParseDecisions(%q) decided %v", args, decided)
		}
	}
}

func TestResolveQuickMakesNoCall(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  approval.Action
	}{{"Yes!", approval.Approve}, {"ok", approval.Approve}, {"no thanks", approval.Cancel}, {"👎", approval.Cancel}} {
		script := llmtest.NewScript() // any call would fail with ErrScriptExhausted
		res, err := approval.Resolve(context.Background(), script, tc.reply, onePending(), approval.ResolveOptions{})
		if err != nil {
			t.Fatalf("%q: %v", tc.reply, err)
		}
		if n := len(script.Requests()); n != 0 {
			t.Errorf("%q: %d model calls, want 0", tc.reply, n)
		}
		if !res.Quick || len(res.Decided) != 1 || res.Decided[0].ID != "r1" || res.Decided[0].Decision.Action != tc.want {
			t.Errorf("%q: %+v, want quick %s of r1", tc.reply, res, tc.want)
		}
		if res.Usage != (llm.Usage{}) {
			t.Errorf("%q: usage %+v without a call", tc.reply, res.Usage)
		}
	}
}

func TestResolveQuickWithoutClient(t *testing.T) {
	res, err := approval.Resolve(context.Background(), nil, "yes", onePending(), approval.ResolveOptions{})
	if err != nil || !res.Quick || len(res.Decided) != 1 {
		t.Fatalf("Resolve(nil client, yes) = %+v, %v", res, err)
	}
	if _, err := approval.Resolve(context.Background(), nil, "yes, but to me", onePending(), approval.ResolveOptions{}); err == nil {
		t.Fatal("a reply that needs the model and no client: want an error")
	}
}

func TestResolveQuickActionNotAllowed(t *testing.T) {
	pending := []approval.Request{{ID: "r1", Options: []string{"cancel"}}}
	script := llmtest.NewScript()
	res, err := approval.Resolve(context.Background(), script, "yes", pending, approval.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Decided) != 0 || len(res.Ignored) != 1 || script.Calls() != 0 {
		t.Fatalf("%+v, %d calls; want nothing decided, one ignored, no call", res, script.Calls())
	}
}

func TestResolveNothingToDo(t *testing.T) {
	script := llmtest.NewScript()
	for _, tc := range []struct {
		reply   string
		pending []approval.Request
	}{{"yes", nil}, {"approve the email", nil}, {"", threePending()}, {"  \n", onePending()}} {
		res, err := approval.Resolve(context.Background(), script, tc.reply, tc.pending, approval.ResolveOptions{})
		if err != nil || res == nil || len(res.Decided) != 0 || res.Quick {
			t.Errorf("Resolve(%q, %d pending) = %+v, %v; want an empty resolution", tc.reply, len(tc.pending), res, err)
		}
	}
	if script.Calls() != 0 {
		t.Errorf("%d model calls, want 0", script.Calls())
	}
}

func TestResolveOneCall(t *testing.T) {
	script := llmtest.NewScript(llmtest.Reply{
		ToolCalls: []llm.ToolCall{llmtest.Call(approval.ResolveToolName,
			`{"decisions":[{"id":"r3","action":"approve"},{"id":"r1","action":"edit","fields":{"to":"me@example.com"}},{"id":"r2","action":"cancel","reason":"too early"}]}`)},
		Usage: llm.Usage{InputTokens: 321, OutputTokens: 45},
	})
	history := []llm.Message{
		llm.SystemMessage("persona"),
		llm.UserMessage("mail the team, book the flight and pay the invoice"),
		llm.AssistantMessage("On it.", llm.ToolCall{ID: "c1", Name: "send_email", Arguments: json.RawMessage(`{}`)}),
		llm.ToolResultMessage(llm.ToolCall{ID: "c1", Name: "send_email"}, "waiting for approval", false),
		llm.AssistantMessage("Please confirm these three actions."),
	}
	opts := approval.ResolveOptions{
		Editable: map[string]json.RawMessage{"r1": json.RawMessage(`{"type":"object","properties":{"to":{"type":"string"}}}`)},
		History:  history,
		Model:    "small-model",
	}
	reply := "pay it first, send the mail to me instead, and no flight, too early"
	res, err := approval.Resolve(context.Background(), script, reply, threePending(), opts)
	if err != nil {
		t.Fatal(err)
	}

	reqs := script.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls, want 1", len(reqs))
	}
	req := reqs[0]
	if req.ToolChoice != llm.ToolChoice(approval.ResolveToolName) {
		t.Errorf("ToolChoice = %q, want the resolve tool forced", req.ToolChoice)
	}
	if len(req.Tools) != 1 || req.Tools[0].Name != approval.ResolveToolName {
		t.Errorf("Tools = %+v, want only %s", req.Tools, approval.ResolveToolName)
	} else if !strings.Contains(req.Tools[0].Description, `"to":{"type":"string"}`) {
		t.Error("the editable schema is not in the tool description")
	}
	if req.Model != "small-model" {
		t.Errorf("Model = %q", req.Model)
	}
	msgs := req.Messages
	if len(msgs) != 5 {
		t.Fatalf("messages = %+v, want system, the three history texts, the reply", msgs)
	}
	sys := msgs[0]
	if sys.Role != llm.RoleSystem {
		t.Fatalf("first message is %s", sys.Role)
	}
	for _, want := range []string{approval.Present(threePending()), `1 = "r1"; 2 = "r2"; 3 = "r3"`, approval.ResolveToolName} {
		if !strings.Contains(sys.Content, want) {
			t.Errorf("system message lacks %q:\n%s", want, sys.Content)
		}
	}
	if msgs[1].Role != llm.RoleUser || msgs[2].Role != llm.RoleAssistant || msgs[2].Content != "On it." || len(msgs[2].ToolCalls) != 0 ||
		msgs[3].Role != llm.RoleAssistant || msgs[3].Content != "Please confirm these three actions." {
		t.Errorf("history not reduced to its texts: %+v", msgs[1:4])
	}
	if last := msgs[4]; last.Role != llm.RoleUser || last.Content != reply {
		t.Errorf("last message = %+v, want the reply", last)
	}
	if err := llm.CheckPairing(msgs); err != nil {
		t.Error(err)
	}

	if res.Quick {
		t.Error("Quick set after a model call")
	}
	if res.Usage != (llm.Usage{InputTokens: 321, OutputTokens: 45}) {
		t.Errorf("Usage = %+v", res.Usage)
	}
	var order []string
	for _, d := range res.Decided {
		order = append(order, d.ID+":"+string(d.Decision.Action))
	}
	if !slices.Equal(order, []string{"r3:approve", "r1:edit", "r2:cancel"}) {
		t.Errorf("decided %v, want the model's order", order)
	}
	if string(res.Decided[1].Decision.Fields) != `{"to":"me@example.com"}` || res.Decided[2].Decision.Reason != "too early" {
		t.Errorf("fields / reason lost: %+v", res.Decided)
	}
}

func TestResolveSinglePendingWithContentGoesToModel(t *testing.T) {
	script := llmtest.NewScript(resolveCall(`{"decisions":[{"id":"r1","action":"edit","fields":{"to":"me@example.com"}}]}`))
	res, err := approval.Resolve(context.Background(), script, "yes, but send it to me instead", onePending(), approval.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if script.Calls() != 1 || res.Quick || len(res.Decided) != 1 || res.Decided[0].Decision.Action != approval.Edit {
		t.Fatalf("%+v after %d calls", res, script.Calls())
	}
}

func TestResolveBareYesWithSeveralPendingGoesToModel(t *testing.T) {
	script := llmtest.NewScript(resolveCall(`{"decisions":[{"id":"r1","action":"approve"},{"id":"r2","action":"approve"},{"id":"r3","action":"approve"}]}`))
	res, err := approval.Resolve(context.Background(), script, "yes", threePending(), approval.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if script.Calls() != 1 || res.Quick || len(res.Decided) != 3 {
		t.Fatalf("%+v after %d calls", res, script.Calls())
	}
}

func TestResolvePlainTextDecidesNothing(t *testing.T) {
	for _, reply := range []llmtest.Reply{
		llmtest.Text("Sure, which one do you mean?"),
		llmtest.Calls(llmtest.Call("send_email", `{"to":"x"}`)), // some other tool
		resolveCall(`{"decisions":[]}`),
	} {
		script := llmtest.NewScript(reply)
		res, err := approval.Resolve(context.Background(), script, "what's the weather?", threePending(), approval.ResolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res == nil || len(res.Decided) != 0 || res.Quick {
			t.Errorf("%+v: want nothing decided", res)
		}
		if script.Calls() != 1 {
			t.Errorf("%d calls", script.Calls())
		}
	}
}

func TestResolveFirstResolveCallCounts(t *testing.T) {
	script := llmtest.NewScript(llmtest.Calls(
		llmtest.Call("other", `{}`),
		llmtest.Call(approval.ResolveToolName, `{"decisions":[{"id":"r2","action":"cancel"}]}`),
		llmtest.Call(approval.ResolveToolName, `{"decisions":[{"id":"r2","action":"approve"}]}`),
	))
	res, err := approval.Resolve(context.Background(), script, "no flight", threePending(), approval.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Decided) != 1 || res.Decided[0].Decision.Action != approval.Cancel {
		t.Fatalf("%+v, want the first resolve call's cancel", res.Decided)
	}
}

func TestResolveIgnoredReported(t *testing.T) {
	script := llmtest.NewScript(resolveCall(`{"decisions":[{"id":"r2","action":"edit","fields":{"seat":"12A"}},{"id":"r1","action":"approve"},{"id":"zz","action":"approve"}]}`))
	res, err := approval.Resolve(context.Background(), script, "send the mail, and a window seat please, and do zz", threePending(), approval.ResolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Decided) != 1 || res.Decided[0].ID != "r1" {
		t.Errorf("decided %+v", res.Decided)
	}
	if len(res.Ignored) != 2 || !strings.HasPrefix(res.Ignored[0], "r2: edit") || !strings.HasPrefix(res.Ignored[1], "zz: ") {
		t.Errorf("ignored %q", res.Ignored)
	}
}

func TestResolveMalformedArguments(t *testing.T) {
	script := llmtest.NewScript(resolveCall(`{"decisions":"all of them"}`))
	res, err := approval.Resolve(context.Background(), script, "all of them", threePending(), approval.ResolveOptions{})
	if !errors.Is(err, approval.ErrInvalidDecision) || res != nil {
		t.Fatalf("Resolve = %+v, %v; want ErrInvalidDecision", res, err)
	}
}

func TestResolveLLMError(t *testing.T) {
	for _, kind := range []llm.ErrorKind{llm.KindRateLimited, llm.KindAuth, llm.KindContextOverflow, llm.KindUnavailable} {
		cause := &llm.Error{Kind: kind, StatusCode: 500, RetryAfter: 3 * time.Second}
		script := llmtest.NewScript(llmtest.Fail(cause))
		res, err := approval.Resolve(context.Background(), script, "approve the email", threePending(), approval.ResolveOptions{})
		if res != nil || err == nil {
			t.Fatalf("Resolve = %+v, %v; want the error", res, err)
		}
		if llm.KindOf(err) != kind || !errors.Is(err, cause) || llm.RetryAfter(err) != 3*time.Second {
			t.Errorf("err = %v: kind %v, want %v", err, llm.KindOf(err), kind)
		}
		if !strings.HasPrefix(err.Error(), "approval: resolve: ") {
			t.Errorf("err = %q, want the approval: resolve: prefix", err)
		}
	}
}

func TestResolveContext(t *testing.T) {
	t.Run("cancelled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for _, tc := range []struct {
			reply   string
			pending []approval.Request
		}{{"yes", onePending()}, {"approve the email", threePending()}} {
			script := llmtest.NewScript(resolveCall(`{"decisions":[]}`))
			res, err := approval.Resolve(ctx, script, tc.reply, tc.pending, approval.ResolveOptions{})
			if !errors.Is(err, context.Canceled) || res != nil {
				t.Errorf("%q: Resolve = %+v, %v; want context.Canceled", tc.reply, res, err)
			}
			if script.Calls() != 0 {
				t.Errorf("%q: %d model calls with a cancelled context", tc.reply, script.Calls())
			}
		}
	})
	t.Run("cancelled during the call", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		script := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply {
			cancel()
			return llmtest.Reply{Delay: time.Hour, ToolCalls: []llm.ToolCall{llmtest.Call(approval.ResolveToolName, `{"decisions":[{"id":"r1","action":"approve"}]}`)}}
		})
		res, err := approval.Resolve(ctx, script, "approve the email", threePending(), approval.ResolveOptions{})
		if !errors.Is(err, context.Canceled) || res != nil {
			t.Fatalf("Resolve = %+v, %v; want context.Canceled", res, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		script := llmtest.NewScript(llmtest.Reply{Delay: time.Hour})
		_, err := approval.Resolve(ctx, script, "approve the email", threePending(), approval.ResolveOptions{})
		if !errors.Is(err, context.DeadlineExceeded) || llm.KindOf(err) != llm.KindTimeout {
			t.Fatalf("err = %v, want a timeout", err)
		}
	})
}

func TestResolveDoesNotChangePending(t *testing.T) {
	pending := threePending()
	before := approval.Present(pending)
	script := llmtest.NewScript(resolveCall(`{"decisions":[{"id":"r1","action":"edit","fields":{"to":"me@example.com"}}]}`))
	if _, err := approval.Resolve(context.Background(), script, "to me", pending, approval.ResolveOptions{}); err != nil {
		t.Fatal(err)
	}
	if approval.Present(pending) != before || pending[0].Details["to"] != "team@example.com" {
		t.Fatal("Resolve changed the pending requests")
	}
}
