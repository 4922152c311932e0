package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/clock/clocktest"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

type EmailIn struct {
	To       string `json:"to" jsonschema:"description=Recipient email address,format=email"`
	Subject  string `json:"subject" jsonschema:"description=Subject line,maxLength=80"`
	Body     string `json:"body,omitempty" jsonschema:"default=Hello"`
	Priority string `json:"priority,omitempty" jsonschema:"enum=low,enum=high" rule:"high only when the user says it is urgent"`
}

// emailAgent needs approval and counts what it sent.
type emailAgent struct {
	mu   sync.Mutex
	sent []EmailIn
}

func (a *emailAgent) Run(ctx context.Context, in EmailIn) (agent.Reply, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = append(a.sent, in)
	return agent.Reply{Text: "Email sent to " + in.To}, nil
}

func (a *emailAgent) Approval(in EmailIn) *approval.Request {
	return &approval.Request{ActionSummary: "Send an email to " + in.To, Details: map[string]any{"to": in.To, "subject": in.Subject}, AllowModification: true}
}

func (a *emailAgent) Sent() []EmailIn {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]EmailIn(nil), a.sent...)
}

type NoteIn struct {
	Title string `json:"title" jsonschema:"description=Title of the note"`
	Day   string `json:"day" jsonschema:"description=Day of the week"`
}

// noteAgent runs without approval; Validate rejects weekend days.
type noteAgent struct{ runs atomic.Int32 }

func (a *noteAgent) Run(ctx context.Context, in NoteIn) (agent.Reply, error) {
	a.runs.Add(1)
	return agent.Reply{Text: "Saved", Data: map[string]string{"title": in.Title, "day": in.Day}}, nil
}

func (a *noteAgent) Validate(in NoteIn) error {
	if in.Day == "Saturday" || in.Day == "Sunday" {
		return agent.InvalidField("day", "must be a weekday")
	}
	return nil
}

// router is a scripted model that answers by kind of request: the loop's
// calls from a queue, phrasing calls (no tools) with a fixed text, and
// forced resolve / extraction calls from their own queues.
type router struct {
	mu      sync.Mutex
	loop    []llmtest.Reply
	resolve []llmtest.Reply
	extract []llmtest.Reply
	phrased int
}

func (r *router) script(t *testing.T) *llmtest.Script {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if err := llm.CheckPairing(req.Messages); err != nil {
			t.Errorf("request breaks pairing: %v", err)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		pop := func(q *[]llmtest.Reply, what string) llmtest.Reply {
			if len(*q) == 0 {
				t.Errorf("unexpected %s call", what)
				return llmtest.Text("(nothing scripted)")
			}
			rep := (*q)[0]
			*q = (*q)[1:]
			return rep
		}
		switch {
		case req.ToolChoice == approval.ResolveToolName:
			return pop(&r.resolve, "resolve")
		case req.ToolChoice == "provide_fields":
			return pop(&r.extract, "extraction")
		case len(req.Tools) == 0:
			r.phrased++
			return llmtest.Text("PHRASED: please confirm")
		}
		return pop(&r.loop, "loop")
	})
}

func agentsOrch(t *testing.T, s llm.Client, cfg agent.Config, email *emailAgent, note *noteAgent) *agent.Orchestrator {
	t.Helper()
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email for the user", email); err != nil {
		t.Fatal(err)
	}
	if err := agent.Register(reg, "save_note", "Save a note", note); err != nil {
		t.Fatal(err)
	}
	cfg.Agents = reg
	if cfg.Clock == nil {
		cfg.Clock = clock.System{} // the pool's clock
	}
	if cfg.Tools == nil {
		cfg.Tools = []tool.Tool{weatherTool()}
	}
	return newOrch(t, s, cfg)
}

func TestAgentToolSchemaSeenByModel(t *testing.T) {
	o := agentsOrch(t, llmtest.NewScript(), agent.Config{}, &emailAgent{}, &noteAgent{})
	specs := map[string]llm.ToolSpec{}
	for _, s := range o.Tools() {
		specs[s.Name] = s
	}
	email, ok := specs["send_email"]
	if !ok || len(specs) != 3 {
		t.Fatalf("tools = %v", specs)
	}
	if !strings.Contains(email.Description, "[Requires user confirmation before execution]") {
		t.Errorf("approval mark missing: %q", email.Description)
	}
	if strings.Contains(specs["save_note"].Description, "confirmation") {
		t.Errorf("save_note needs no approval: %q", specs["save_note"].Description)
	}
	var schema struct {
		Properties map[string]struct {
			Description string `json:"description"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(email.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if len(schema.Required) != 0 {
		t.Errorf("required fields are asked from the user, not forced on the model: %v", schema.Required)
	}
	for field, wants := range map[string][]string{
		"to":               {"Recipient email address", "Required", "Format: email"},
		"subject":          {"Required", "At most 80 characters"},
		"body":             {"Default \"Hello\""},
		"priority":         {`One of "low", "high"`, "Rule: high only when the user says it is urgent"},
		"task_instruction": {"Optional"},
	} {
		d := schema.Properties[field].Description
		for _, w := range wants {
			if !strings.Contains(d, w) {
				t.Errorf("%s description %q lacks %q", field, d, w)
			}
		}
	}
}

func TestRegisterRejects(t *testing.T) {
	reg := agent.NewRegistry()
	if err := agent.Register[EmailIn](reg, "bad name", "x", &emailAgent{}); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("bad name: %v", err)
	}
	if err := agent.Register[EmailIn](reg, "e", "x", nil); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("nil impl: %v", err)
	}
	if err := agent.Register(reg, "e", "x", &emailAgent{}); err != nil {
		t.Fatal(err)
	}
	if err := agent.Register(reg, "e", "x", &emailAgent{}); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("duplicate: %v", err)
	}
	type clash struct {
		TaskInstruction string `json:"task_instruction"`
	}
	if err := agent.Register(reg, "c", "x", agentFunc[clash](nil)); !errors.Is(err, agent.ErrInvalidAgent) {
		t.Errorf("task_instruction clash: %v", err)
	}
	// A tool and an agent may not share a name.
	reg2 := agent.NewRegistry()
	if err := agent.Register(reg2, "get_weather", "x", &emailAgent{}); err != nil {
		t.Fatal(err)
	}
	if _, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), Tools: []tool.Tool{weatherTool()}, Agents: reg2}); !errors.Is(err, agent.ErrInvalidConfig) {
		t.Errorf("name clash with a tool: %v", err)
	}
}

type agentFunc[In any] func(context.Context, In) (agent.Reply, error)

func (f agentFunc[In]) Run(ctx context.Context, in In) (agent.Reply, error) { return f(ctx, in) }

func TestSchemaVersionFollowsFields(t *testing.T) {
	type v1 struct {
		A string `json:"a"`
	}
	type v2 struct {
		A string `json:"a"`
		B int    `json:"b,omitempty"`
	}
	r1, r2, r3 := agent.NewRegistry(), agent.NewRegistry(), agent.NewRegistry()
	_ = agent.Register(r1, "x", "d", agentFunc[v1](nil))
	_ = agent.Register(r2, "x", "d", agentFunc[v2](nil))
	_ = agent.Register(r3, "x", "other description", agentFunc[v1](nil))
	a, _ := r1.SchemaVersion("x")
	b, _ := r2.SchemaVersion("x")
	c, _ := r3.SchemaVersion("x")
	if a == "" || a == b {
		t.Errorf("a field change must change the version: %q %q", a, b)
	}
	if a != c {
		t.Errorf("the version is the schema's, not the description's: %q %q", a, c)
	}
}

func TestHiddenAgentIsNotATool(t *testing.T) {
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send", &emailAgent{}, agent.ExposeAsTool(false)); err != nil {
		t.Fatal(err)
	}
	s := llmtest.NewScript(llmtest.Calls(llmtest.Call("send_email", `{"to":"a@b.co","subject":"x"}`)), llmtest.Text("done"))
	email := &emailAgent{}
	_ = email
	o := newOrch(t, s, agent.Config{Agents: reg, Tools: []tool.Tool{weatherTool()}})
	for _, sp := range o.Tools() {
		if sp.Name == "send_email" {
			t.Fatal("hidden agent offered to the model")
		}
	}
	res, err := o.HandleMessage(context.Background(), msg("mail"))
	if err != nil {
		t.Fatal(err)
	}
	if res.ToolCalls[0].Success || !strings.Contains(res.ToolCalls[0].Error, "unknown tool") {
		t.Fatalf("a hidden agent called by name must be an unknown tool: %+v", res.ToolCalls[0])
	}
}

func TestAgentRunsWhenComplete(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("save_note", `{"title":"Buy milk","day":"Monday","task_instruction":"from the shopping chat"}`)),
		llmtest.Text("Saved your note."),
	}}
	note := &noteAgent{}
	o := agentsOrch(t, rt.script(t), agent.Config{}, &emailAgent{}, note)
	res, err := o.HandleMessage(context.Background(), msg("note: buy milk monday"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusCompleted || res.Response != "Saved your note." || note.runs.Load() != 1 {
		t.Fatalf("res = %+v, runs = %d", res, note.runs.Load())
	}
	rec := res.ToolCalls[0]
	if rec.ResultStatus != "completed" || !rec.Success {
		t.Fatalf("record = %+v", rec)
	}
	h, _ := o.History(context.Background(), "u1", "c1")
	if got := h[2].Content; got != `Saved`+"\n"+`{"day":"Monday","title":"Buy milk"}` {
		t.Fatalf("tool result = %q", got)
	}
}

func TestMissingFieldWaitsForInputThenResumes(t *testing.T) {
	rt := &router{
		loop: []llmtest.Reply{
			llmtest.Calls(llmtest.Call("save_note", `{"title":"Dentist"}`)),
			llmtest.Text("Noted for Tuesday."),
		},
		extract: []llmtest.Reply{llmtest.Calls(llmtest.Call("provide_fields", `{"day":"Tuesday"}`))},
	}
	note := &noteAgent{}
	s := rt.script(t)
	o := agentsOrch(t, s, agent.Config{}, &emailAgent{}, note)
	ctx := context.Background()
	res, err := o.HandleMessage(ctx, msg("note the dentist"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusWaitingForInput || note.runs.Load() != 0 || res.Response != "PHRASED: please confirm" {
		t.Fatalf("res = %+v", res)
	}
	if len(res.Waiting) != 1 || res.Waiting[0].AgentName != "save_note" || fmt.Sprint(res.Waiting[0].Missing) != "[day]" {
		t.Fatalf("waiting = %+v", res.Waiting)
	}
	if res.ToolCalls[0].ResultStatus != "waiting_for_input" {
		t.Fatalf("record = %+v", res.ToolCalls[0])
	}
	// The phrasing call had no tools and was told what is missing.
	reqs := s.Requests()
	last := reqs[len(reqs)-1]
	if len(last.Tools) != 0 || !strings.Contains(last.Messages[len(last.Messages)-1].Content, "day (Day of the week)") {
		t.Fatalf("phrasing request = %+v", last.Messages[len(last.Messages)-1])
	}

	res, err = o.HandleMessage(ctx, msg("on tuesday"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusCompleted || res.Response != "Noted for Tuesday." || note.runs.Load() != 1 {
		t.Fatalf("res = %+v runs=%d", res, note.runs.Load())
	}
	if pending, _ := o.PendingAgents(ctx, "u1"); len(pending) != 0 {
		t.Fatalf("pool not emptied: %+v", pending)
	}
	// The extraction call was forced onto the agent's fields.
	var ext llm.Request
	for _, r := range s.Requests() {
		if r.ToolChoice == "provide_fields" {
			ext = r
		}
	}
	if len(ext.Tools) != 1 || !strings.Contains(string(ext.Tools[0].Parameters), `"day"`) || ext.Messages[len(ext.Messages)-1].Content != "on tuesday" {
		t.Fatalf("extraction request = %+v", ext)
	}
}

func TestInvalidFieldsAreReportedAndAskedAgain(t *testing.T) {
	rt := &router{
		loop: []llmtest.Reply{llmtest.Calls(llmtest.Call("save_note", `{"title":"Gym","day":"Saturday"}`))},
		extract: []llmtest.Reply{
			llmtest.Calls(llmtest.Call("provide_fields", `{"day":"Sunday"}`)),
			llmtest.Calls(llmtest.Call("provide_fields", `{"day":"Friday"}`)),
		},
	}
	rt.loop = append(rt.loop, llmtest.Text("Gym on Friday."))
	note := &noteAgent{}
	o := agentsOrch(t, rt.script(t), agent.Config{Loop: agent.LoopConfig{DirectAgentPrompts: true}}, &emailAgent{}, note)
	ctx := context.Background()
	res, err := o.HandleMessage(ctx, msg("gym saturday"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusWaitingForInput || !strings.Contains(res.Response, "day: must be a weekday") || rt.phrased != 0 {
		t.Fatalf("res = %+v phrased=%d", res, rt.phrased)
	}
	res, _ = o.HandleMessage(ctx, msg("sunday then"))
	if res.Status != agent.StatusWaitingForInput || note.runs.Load() != 0 {
		t.Fatalf("still invalid must ask again: %+v", res)
	}
	res, _ = o.HandleMessage(ctx, msg("friday"))
	if res.Status != agent.StatusCompleted || note.runs.Load() != 1 {
		t.Fatalf("res = %+v runs = %d", res, note.runs.Load())
	}
}

func TestUnrelatedReplyFallsThrough(t *testing.T) {
	rt := &router{
		loop: []llmtest.Reply{
			llmtest.Calls(llmtest.Call("save_note", `{"title":"Dentist"}`)),
			llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)),
			llmtest.Text("Sunny in Oslo. Which day for the dentist note?"),
		},
		extract: []llmtest.Reply{llmtest.Calls(llmtest.Call("provide_fields", `{"unrelated":true}`))},
	}
	s := rt.script(t)
	note := &noteAgent{}
	o := agentsOrch(t, s, agent.Config{}, &emailAgent{}, note)
	ctx := context.Background()
	if _, err := o.HandleMessage(ctx, msg("note the dentist")); err != nil {
		t.Fatal(err)
	}
	res, err := o.HandleMessage(ctx, msg("what's the weather in Oslo?"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusWaitingForInput || note.runs.Load() != 0 || len(res.Waiting) != 1 {
		t.Fatalf("res = %+v", res)
	}
	// The model was told about the waiting agent.
	reqs := s.Requests()
	found := false
	for _, m := range reqs[len(reqs)-1].Messages {
		if m.Role == llm.RoleSystem && strings.Contains(m.Content, "save_note") && strings.Contains(m.Content, "still waits") {
			found = true
		}
	}
	if !found {
		t.Fatal("the loop was not told about the waiting agent")
	}
}

// parallelApprovals scripts one turn calling the weather tool and two
// emails that need approval.
func parallelApprovals() []llmtest.Reply {
	return []llmtest.Reply{llmtest.Calls(
		llmtest.Call("get_weather", `{"city":"NYC"}`),
		llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`),
		llmtest.Call("send_email", `{"to":"boss@example.com","subject":"Plan"}`),
	)}
}

func TestApprovalsOfOneTurnArePresentedTogether(t *testing.T) {
	rt := &router{loop: parallelApprovals()}
	email := &emailAgent{}
	s := rt.script(t)
	o := agentsOrch(t, s, agent.Config{}, email, &noteAgent{})
	var events []agent.Event
	for ev, err := range o.Stream(context.Background(), msg("weather and mail both")) {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, ev)
	}
	res := events[len(events)-1].Result
	if res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 2 || len(email.Sent()) != 0 {
		t.Fatalf("res = %+v", res)
	}
	var state *agent.Event
	for i := range events {
		if events[i].Type == agent.EventStateChange {
			state = &events[i]
		}
	}
	if state == nil || state.State != agent.StatusWaitingForApproval || len(state.Approvals) != 2 || state.Approvals[0].ExpiresAt.IsZero() {
		t.Fatalf("state change = %+v", state)
	}
	a := res.PendingApprovals[0]
	if a.TenantID != "u1" || a.AgentName != "send_email" || a.Source != approval.SourceUser ||
		a.ExpiresAt.Sub(a.CreatedAt) != agent.DefaultApprovalTimeout || len(a.Options) != 3 {
		t.Fatalf("request = %+v", a)
	}
	list, err := o.ListPendingApprovals(context.Background(), "u1")
	if err != nil || len(list) != 2 {
		t.Fatalf("list = %v, %v", list, err)
	}
	if other, _ := o.ListPendingApprovals(context.Background(), "u2"); len(other) != 0 {
		t.Fatalf("another tenant sees %v", other)
	}
}

func TestBareYesApprovesTheOnlyPendingAction(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sent. Anything else?"),
	}}
	email := &emailAgent{}
	s := rt.script(t)
	o := agentsOrch(t, s, agent.Config{}, email, &noteAgent{})
	ctx := context.Background()
	if _, err := o.HandleMessage(ctx, msg("mail the team")); err != nil {
		t.Fatal(err)
	}
	res, err := o.HandleMessage(ctx, msg("Yes!"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusCompleted || res.Response != "Sent. Anything else?" {
		t.Fatalf("res = %+v", res)
	}
	if sent := email.Sent(); len(sent) != 1 || sent[0].To != "team@example.com" || sent[0].Body != "Hello" {
		t.Fatalf("sent = %+v (the default body should be filled in)", sent)
	}
	for _, r := range s.Requests() {
		if r.ToolChoice == approval.ResolveToolName {
			t.Fatal("a bare yes must not cost a model call")
		}
	}
	// The model saw the result and could follow up.
	last := s.Requests()[len(s.Requests())-1].Messages
	if m := last[len(last)-1]; m.Role != llm.RoleTool || m.Content != "Email sent to team@example.com" {
		t.Fatalf("last message = %+v", m)
	}
}

func TestRepliesResolveSeveralApprovalsInOrder(t *testing.T) {
	rt := &router{
		loop: append(parallelApprovals(), llmtest.Text("Done: one sent, one cancelled.")),
	}
	email := &emailAgent{}
	s := rt.script(t)
	o := agentsOrch(t, s, agent.Config{}, email, &noteAgent{})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("weather and mail both"))
	if err != nil {
		t.Fatal(err)
	}
	team, boss := first.PendingApprovals[0], first.PendingApprovals[1]
	if team.Details["to"] != "team@example.com" {
		team, boss = boss, team
	}
	rt.mu.Lock()
	rt.resolve = []llmtest.Reply{llmtest.Calls(llmtest.Call(approval.ResolveToolName, map[string]any{"decisions": []map[string]any{
		{"id": boss.ID, "action": "edit", "fields": map[string]any{"subject": "Plan v2"}},
		{"id": team.ID, "action": "cancel"},
	}}))}
	rt.mu.Unlock()
	res, err := o.HandleMessage(ctx, msg("send the boss one as 'Plan v2', drop the team one"))
	if err != nil {
		t.Fatal(err)
	}
	sent := email.Sent()
	if res.Status != agent.StatusCompleted || len(sent) != 1 || sent[0].To != "boss@example.com" || sent[0].Subject != "Plan v2" {
		t.Fatalf("res = %+v sent = %+v", res, sent)
	}
	if len(res.ToolCalls) != 2 || res.ToolCalls[0].Name != "send_email" || !res.ToolCalls[0].Success || res.ToolCalls[1].Success ||
		res.ToolCalls[1].Error != "User cancelled this action." {
		t.Fatalf("records (in confirmation order) = %+v", res.ToolCalls)
	}
	if left, _ := o.ListPendingApprovals(ctx, "u1"); len(left) != 0 {
		t.Fatalf("left = %+v", left)
	}
}

func TestInvalidEditIsAskedAgain(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))}}
	email := &emailAgent{}
	o := agentsOrch(t, rt.script(t), agent.Config{Loop: agent.LoopConfig{DirectAgentPrompts: true}}, email, &noteAgent{})
	ctx := context.Background()
	first, _ := o.HandleMessage(ctx, msg("mail the team"))
	id := first.PendingApprovals[0].ID
	rt.mu.Lock()
	rt.resolve = []llmtest.Reply{llmtest.Calls(llmtest.Call(approval.ResolveToolName, map[string]any{"decisions": []map[string]any{
		{"id": id, "action": "edit", "fields": map[string]any{"to": "not an address"}},
	}}))}
	rt.mu.Unlock()
	res, err := o.HandleMessage(ctx, msg("yes but send it to not an address"))
	if err != nil {
		t.Fatal(err)
	}
	if len(email.Sent()) != 0 || res.Status != agent.StatusWaitingForApproval || !strings.Contains(res.Response, "was not applied") ||
		!strings.Contains(res.Response, "to: must be a valid email") {
		t.Fatalf("res = %+v sent = %v", res, email.Sent())
	}
	// Still the original action, still pending under the same ID.
	list, _ := o.ListPendingApprovals(ctx, "u1")
	if len(list) != 1 || list[0].ID != id || list[0].Details["to"] != "team@example.com" {
		t.Fatalf("pending = %+v", list)
	}
}

func TestResolveApprovalBadInput(t *testing.T) {
	now := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	clk := clocktest.New(now)
	rt := &router{loop: []llmtest.Reply{llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))}}
	email := &emailAgent{}
	mem := newPool(t, pool.MemoryConfig{Clock: clk})
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: mem, Clock: clk}, email, &noteAgent{})
	ctx := context.Background()
	first, _ := o.HandleMessage(ctx, msg("mail the team"))
	id := first.PendingApprovals[0].ID

	if _, err := o.ResolveApproval(ctx, "u1", "agt_nope", approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := o.ResolveApproval(ctx, "u2", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("another tenant's id: %v", err)
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: "maybe"}); !errors.Is(err, approval.ErrInvalidDecision) {
		t.Errorf("bad action: %v", err)
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{"to":"nope"}`)}); err != nil {
		t.Errorf("an invalid edit is answered, not an error: %v", err)
	}
	if len(email.Sent()) != 0 {
		t.Fatalf("something ran: %v", email.Sent())
	}
	later := now.Add(agent.DefaultApprovalTimeout + time.Minute)
	clk.Set(later)
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrExpired) {
		t.Errorf("after expiry: %v", err)
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Errorf("an expired request is removed: %v", err)
	}
	if len(email.Sent()) != 0 {
		t.Fatalf("something ran: %v", email.Sent())
	}
}

func TestExpiredApprovalIsToldToTheModel(t *testing.T) {
	now := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)
	clk := clocktest.New(now)
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sorry, that request expired."),
	}}
	email := &emailAgent{}
	s := rt.script(t)
	mem := newPool(t, pool.MemoryConfig{Clock: clk})
	o := agentsOrch(t, s, agent.Config{Pool: mem, Clock: clk}, email, &noteAgent{})
	ctx := context.Background()
	_, _ = o.HandleMessage(ctx, msg("mail the team"))
	later := now.Add(time.Hour)
	clk.Set(later)
	res, err := o.HandleMessage(ctx, msg("yes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(email.Sent()) != 0 || res.Status != agent.StatusCompleted {
		t.Fatalf("res = %+v sent = %v", res, email.Sent())
	}
	reqs := s.Requests()
	told := false
	for _, m := range reqs[len(reqs)-1].Messages {
		told = told || m.Role == llm.RoleSystem && strings.Contains(m.Content, "expired")
	}
	if !told {
		t.Fatal("the model was not told the request expired")
	}
}

// TestApprovalRunsExactlyOnce races decisions for one approval through
// ResolveApproval and free-text replies, on two orchestrators sharing one
// pool: the email goes out once.
func TestApprovalRunsExactlyOnce(t *testing.T) {
	for round := range 5 {
		shared := newPool(t, pool.MemoryConfig{})
		email := &emailAgent{}
		mk := func(starts bool) *agent.Orchestrator {
			rt := &router{}
			if starts { // only a's first turn asks for the email
				rt.loop = append(rt.loop, llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)))
			}
			for range 20 {
				rt.loop = append(rt.loop, llmtest.Text("ok"))
			}
			return agentsOrch(t, llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
				rt.mu.Lock()
				defer rt.mu.Unlock()
				if len(req.Tools) == 0 {
					return llmtest.Text("confirm?")
				}
				r := rt.loop[0]
				rt.loop = rt.loop[1:]
				return r
			}), agent.Config{Pool: shared}, email, &noteAgent{})
		}
		a, b := mk(true), mk(false)
		first, err := a.HandleMessage(context.Background(), msg("mail the team"))
		if err != nil {
			t.Fatal(err)
		}
		id := first.PendingApprovals[0].ID
		var wg sync.WaitGroup
		var wins atomic.Int32
		for i := range 8 {
			o := a
			if i%2 == 1 {
				o = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i%4 == 3 {
					_, _ = o.HandleMessage(context.Background(), msg("yes"))
					return
				}
				_, err := o.ResolveApproval(context.Background(), "u1", id, approval.Decision{Action: approval.Approve})
				if err == nil {
					wins.Add(1)
				} else if !errors.Is(err, approval.ErrNotFound) {
					t.Errorf("loser's error: %v", err)
				}
			}()
		}
		wg.Wait()
		if n := len(email.Sent()); n != 1 {
			t.Fatalf("round %d: the email was sent %d times", round, n)
		}
		if wins.Load() > 1 {
			t.Fatalf("round %d: %d ResolveApproval calls won", round, wins.Load())
		}
	}
}

func TestStaleSchemaEntryIsDiscarded(t *testing.T) {
	shared := newPool(t, pool.MemoryConfig{})
	ctx := context.Background()
	now := time.Now()
	err := shared.Create(ctx, &pool.Entry{
		ID: "agt_old", AgentName: "send_email", TenantID: "u1", ConversationID: "c1",
		Status: pool.StatusWaitingForApproval, SchemaVersion: "0123456789abcdef",
		Fields:    json.RawMessage(`{"to":"team@example.com","subject":"old"}`),
		Approval:  &approval.Request{ID: "agt_old", AgentName: "send_email", ActionSummary: "old", TenantID: "u1", ConversationID: "c1", ExpiresAt: now.Add(time.Hour)},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	rt := &router{loop: []llmtest.Reply{llmtest.Text("What shall I do?")}}
	email := &emailAgent{}
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: shared, Clock: clock.System{}}, email, &noteAgent{})
	res, err := o.HandleMessage(ctx, msg("yes"))
	if err != nil {
		t.Fatal(err)
	}
	if len(email.Sent()) != 0 || res.Status != agent.StatusCompleted {
		t.Fatalf("a stale entry ran: %+v", res)
	}
	if _, err := shared.Get(ctx, "u1", "agt_old"); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("stale entry kept: %v", err)
	}
}

func TestPauseResumeCancel(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Nothing pending."),
		llmtest.Text("Sent."),
	}}
	email := &emailAgent{}
	o := agentsOrch(t, rt.script(t), agent.Config{}, email, &noteAgent{})
	ctx := context.Background()
	first, _ := o.HandleMessage(ctx, msg("mail the team"))
	id := first.PendingApprovals[0].ID
	if err := o.PauseAgent(ctx, "u1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, agent.ErrPaused) {
		t.Fatalf("paused: %v", err)
	}
	// A paused agent is not served by the user's reply either.
	if res, _ := o.HandleMessage(ctx, msg("yes")); len(email.Sent()) != 0 || res.Response != "Nothing pending." {
		t.Fatalf("paused entry served: %+v", res)
	}
	if err := o.ResumeAgent(ctx, "u1", id); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); err != nil || len(email.Sent()) != 1 {
		t.Fatalf("resume then approve: %v, sent %d", err, len(email.Sent()))
	}
	if err := o.CancelAgent(ctx, "u1", id); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("cancel after it ran: %v", err)
	}
}

func TestCancelAgentTellsTheConversation(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))}}
	email := &emailAgent{}
	o := agentsOrch(t, rt.script(t), agent.Config{}, email, &noteAgent{})
	ctx := context.Background()
	first, _ := o.HandleMessage(ctx, msg("mail the team"))
	if err := o.CancelAgent(ctx, "u1", first.PendingApprovals[0].ID); err != nil {
		t.Fatal(err)
	}
	h, _ := o.History(ctx, "u1", "c1")
	if err := llm.CheckPairing(h); err != nil {
		t.Fatal(err)
	}
	if last := h[len(h)-1]; last.Content != "User cancelled this action." || !last.IsError {
		t.Fatalf("last = %+v", last)
	}
	if list, _ := o.ListPendingApprovals(ctx, "u1"); len(list) != 0 || len(email.Sent()) != 0 {
		t.Fatalf("list %v sent %v", list, email.Sent())
	}
}

func TestPoolFullBecomesAnErrorResult(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"a@example.com","subject":"1"}`), llmtest.Call("send_email", `{"to":"b@example.com","subject":"2"}`)),
		llmtest.Text("One is waiting; the other could not be queued."),
	}}
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: newPool(t, pool.MemoryConfig{MaxPerTenant: 1})}, &emailAgent{}, &noteAgent{})
	res, err := o.HandleMessage(context.Background(), msg("two mails"))
	if err != nil {
		t.Fatal(err)
	}
	var failed int
	for _, r := range res.ToolCalls {
		if !r.Success && strings.Contains(r.Error, "too many pending") {
			failed++
		}
	}
	if failed != 1 || len(res.PendingApprovals) != 1 {
		t.Fatalf("res = %+v", res)
	}
}

func TestAgentPanicAndTimeoutAreErrorResults(t *testing.T) {
	type in struct {
		X string `json:"x"`
	}
	reg := agent.NewRegistry()
	_ = agent.Register(reg, "boom", "panics", agentFunc[in](func(context.Context, in) (agent.Reply, error) { panic("kaboom") }))
	_ = agent.Register(reg, "slow", "hangs", agentFunc[in](func(ctx context.Context, _ in) (agent.Reply, error) {
		<-ctx.Done()
		return agent.Reply{}, ctx.Err()
	}), agent.AgentTimeout(20*time.Millisecond))
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("boom", `{"x":"1"}`), llmtest.Call("slow", `{"x":"1"}`)),
		llmtest.Text("Both failed."),
	)
	o := newOrch(t, s, agent.Config{Agents: reg})
	res, err := o.HandleMessage(context.Background(), msg("go"))
	if err != nil {
		t.Fatal(err)
	}
	errs := map[string]string{}
	for _, r := range res.ToolCalls {
		errs[r.Name] = r.Error
		if r.ResultStatus != "error" {
			t.Errorf("%s status %q", r.Name, r.ResultStatus)
		}
	}
	// A panic's text goes to the logger only.
	if !strings.Contains(errs["boom"], "internal error") || strings.Contains(errs["boom"], "kaboom") || !strings.Contains(errs["slow"], "timed out after 20ms") {
		t.Fatalf("errors = %v", errs)
	}
}

// The default pool runs on Config.Clock, so a pinned clock in the past does
// not make every pooled agent expire at once.
func TestDefaultPoolFollowsConfigNow(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))}}
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	o := agentsOrch(t, rt.script(t), agent.Config{Clock: clocktest.New(past)}, &emailAgent{}, &noteAgent{})
	res, err := o.HandleMessage(context.Background(), msg("mail the team"))
	if err != nil {
		t.Fatal(err)
	}
	list, err := o.ListPendingApprovals(context.Background(), "u1")
	if err != nil || len(list) != 1 || list[0].ID != res.PendingApprovals[0].ID || !list[0].CreatedAt.Equal(past) {
		t.Fatalf("list = %+v, %v", list, err)
	}
}

func TestStreamReportsResumedAgents(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sent."),
	}}
	o := agentsOrch(t, rt.script(t), agent.Config{}, &emailAgent{}, &noteAgent{})
	ctx := context.Background()
	if _, err := o.HandleMessage(ctx, msg("mail the team")); err != nil {
		t.Fatal(err)
	}
	var types []agent.EventType
	for ev, err := range o.Stream(ctx, msg("yes")) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Type == agent.EventToolResult && (ev.ToolCall.Name != "send_email" || ev.ToolCall.ResultStatus != "completed") {
			t.Fatalf("result event = %+v", ev.ToolCall)
		}
	}
	got := fmt.Sprint(types)
	if !strings.HasPrefix(got, "[tool_call_start tool_result ") || !strings.HasSuffix(got, " execution_end]") {
		t.Fatalf("events = %s", got)
	}
}

func TestResolveApprovalEditAndCancelFromAUI(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(
			llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`),
			llmtest.Call("send_email", `{"to":"boss@example.com","subject":"Plan"}`),
		),
		llmtest.Text("Sent to you instead."),
		llmtest.Text("Cancelled the other one."),
	}}
	email := &emailAgent{}
	o := agentsOrch(t, rt.script(t), agent.Config{}, email, &noteAgent{})
	ctx := context.Background()
	first, _ := o.HandleMessage(ctx, msg("two mails"))
	a, b := first.PendingApprovals[0].ID, first.PendingApprovals[1].ID
	res, err := o.ResolveApproval(ctx, "u1", a, approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{"to":"me@example.com"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if sent := email.Sent(); len(sent) != 1 || sent[0].To != "me@example.com" || sent[0].Subject != "Plan" {
		t.Fatalf("sent = %+v", sent)
	}
	// The other approval is still open, and the Result says so.
	if res.Response != "Sent to you instead." || res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 1 || res.PendingApprovals[0].ID != b {
		t.Fatalf("res = %+v", res)
	}
	res, err = o.ResolveApproval(ctx, "u1", b, approval.Decision{Action: approval.Cancel, Reason: "not needed"})
	if err != nil || res.Status != agent.StatusCompleted || len(email.Sent()) != 1 {
		t.Fatalf("cancel: %+v, %v", res, err)
	}
	if res.ToolCalls[0].Error != "User cancelled this action." || !res.ToolCalls[0].Resumed {
		t.Fatalf("record = %+v", res.ToolCalls[0])
	}
	h, _ := o.History(ctx, "u1", "c1")
	if err := llm.CheckPairing(h); err != nil {
		t.Fatal(err)
	}
}

type PanickyIn struct {
	X string `json:"x"`
}

type panicky struct{ where string }

func (p panicky) Run(context.Context, PanickyIn) (agent.Reply, error) {
	return agent.Reply{Text: "ran"}, nil
}
func (p panicky) Validate(PanickyIn) error {
	if p.where == "validate" {
		panic("validate blew up")
	}
	return nil
}
func (p panicky) Approval(PanickyIn) *approval.Request {
	if p.where == "approval" {
		panic("approval blew up")
	}
	return nil
}

// A panic in an agent's Validate or Approval is an error result, never a
// crash of the host process.
func TestAgentMethodPanicsAreRecovered(t *testing.T) {
	reg := agent.NewRegistry()
	_ = agent.Register(reg, "v", "panics in Validate", panicky{"validate"})
	_ = agent.Register(reg, "a", "panics in Approval", panicky{"approval"})
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("v", `{"x":"1"}`), llmtest.Call("a", `{"x":"1"}`)),
		llmtest.Text("Both broke."),
	)
	o := newOrch(t, s, agent.Config{Agents: reg})
	res, err := o.HandleMessage(context.Background(), msg("go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.ToolCalls {
		if r.Success || !strings.Contains(r.Error, "internal error") || strings.Contains(r.Error, "blew up") {
			t.Errorf("%s: %+v", r.Name, r)
		}
	}
}

// A decision is bound to the action the user saw: once the draft is edited
// (here by another writer of the pool), a decision carrying the old
// fingerprint fails with approval.ErrStale and nothing runs; pausing and
// resuming does not change the fingerprint.
func TestApprovalFingerprintBindsTheDecisionToWhatWasShown(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sent."),
	}}
	email := &emailAgent{}
	store := newPool(t, pool.MemoryConfig{})
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: store}, email, &noteAgent{})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("mail the team"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("res=%+v err=%v", first, err)
	}
	shown := first.PendingApprovals[0]
	if shown.Fingerprint == "" {
		t.Fatal("the pending request has no fingerprint")
	}
	listed, err := o.ListPendingApprovals(ctx, "u1")
	if err != nil || len(listed) != 1 || listed[0].Fingerprint != shown.Fingerprint {
		t.Fatalf("listed %+v err=%v, want fingerprint %s", listed, err, shown.Fingerprint)
	}
	// Pause and resume bump the pool revision, not the fingerprint.
	if err := o.PauseAgent(ctx, "u1", shown.ID); err != nil {
		t.Fatal(err)
	}
	if err := o.ResumeAgent(ctx, "u1", shown.ID); err != nil {
		t.Fatal(err)
	}
	if l, _ := o.ListPendingApprovals(ctx, "u1"); len(l) != 1 || l[0].Fingerprint != shown.Fingerprint {
		t.Fatalf("fingerprint changed by pause/resume: %+v", l)
	}

	// The draft is edited after the user saw it.
	e, err := store.Get(ctx, "u1", shown.ID)
	if err != nil {
		t.Fatal(err)
	}
	e.Fields = json.RawMessage(`{"to":"everyone@example.com","subject":"Plan"}`)
	if err := store.Update(ctx, e); err != nil {
		t.Fatal(err)
	}
	_, err = o.ResolveApproval(ctx, "u1", shown.ID, approval.Decision{Action: approval.Approve, Fingerprint: shown.Fingerprint})
	if !errors.Is(err, approval.ErrStale) {
		t.Fatalf("approving what was shown after an edit: err = %v, want approval.ErrStale", err)
	}
	if n := len(email.Sent()); n != 0 {
		t.Fatalf("a stale decision sent %d emails", n)
	}
	now, err := o.ListPendingApprovals(ctx, "u1")
	if err != nil || len(now) != 1 || now[0].Fingerprint == shown.Fingerprint {
		t.Fatalf("after a stale decision: %+v err=%v (want it pending, with a new fingerprint)", now, err)
	}
	// Deciding on the current screen runs the current action, once.
	if _, err := o.ResolveApproval(ctx, "u1", shown.ID, approval.Decision{Action: approval.Approve, Fingerprint: now[0].Fingerprint}); err != nil {
		t.Fatal(err)
	}
	if sent := email.Sent(); len(sent) != 1 || sent[0].To != "everyone@example.com" {
		t.Fatalf("sent %+v", sent)
	}
}

// A chat reply is bound to the actions it was shown: one edited while the
// reply was being resolved is not run, stays pending, and is shown again.
func TestChatDecisionOnAnActionEditedMeanwhileDoesNotRunIt(t *testing.T) {
	store := newPool(t, pool.MemoryConfig{})
	var id string
	edited := false
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		switch {
		case req.ToolChoice == approval.ResolveToolName:
			// Another writer edits the draft while the reply is resolved.
			e, err := store.Get(context.Background(), "u1", id)
			if err != nil {
				t.Error(err)
			} else {
				e.Fields = json.RawMessage(`{"to":"everyone@example.com","subject":"Plan"}`)
				if err := store.Update(context.Background(), e); err != nil {
					t.Error(err)
				}
				edited = true
			}
			return llmtest.Calls(llmtest.Call(approval.ResolveToolName, map[string]any{"decisions": []map[string]any{{"id": id, "action": "approve"}}}))
		case len(req.Tools) == 0:
			return llmtest.Text("PHRASED: the draft changed, please confirm again")
		case !edited:
			return llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))
		}
		return llmtest.Text("unexpected loop call")
	})
	email := &emailAgent{}
	o := agentsOrch(t, paired{t, s}, agent.Config{Pool: store}, email, &noteAgent{})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("mail the team"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("res=%+v err=%v", first, err)
	}
	id = first.PendingApprovals[0].ID
	res, err := o.HandleMessage(ctx, msg("looks right to me, go ahead and send it"))
	if err != nil {
		t.Fatal(err)
	}
	if !edited || len(email.Sent()) != 0 {
		t.Fatalf("edited=%v sent=%+v: an action changed after it was shown ran on the user's word", edited, email.Sent())
	}
	if res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 1 || res.PendingApprovals[0].Fingerprint == first.PendingApprovals[0].Fingerprint {
		t.Fatalf("res = %+v: want the changed action pending again, with its new fingerprint", res)
	}
}

type plainIn struct {
	Note string `json:"note,omitempty"`
}

// A field with nothing to say has no description, not an empty one.
func TestAgentSchemaHasNoEmptyDescriptions(t *testing.T) {
	reg := agent.NewRegistry()
	err := agent.Register(reg, "jot", "Jot something down", agentFunc[plainIn](func(context.Context, plainIn) (agent.Reply, error) {
		return agent.Reply{Text: "ok"}, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, llmtest.NewScript(), agent.Config{Agents: reg})
	for _, s := range o.Tools() {
		if s.Name != "jot" {
			continue
		}
		var schema struct {
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil {
			t.Fatal(err)
		}
		if d, ok := schema.Properties["note"]["description"]; ok {
			t.Fatalf("note has description %q; want none: %s", d, s.Parameters)
		}
		return
	}
	t.Fatal("jot is not a tool")
}

// Approvals are listed in one order everywhere — Result.PendingApprovals,
// ListPendingApprovals and the approval call the model answers: oldest
// first, those of one turn in the order the model called them, whichever
// parallel call parked first.
func TestPendingApprovalsAreInOneOrderEverywhere(t *testing.T) {
	for round := range 20 {
		var resolveIDs []string
		rt := &router{loop: []llmtest.Reply{
			llmtest.Calls(
				llmtest.Call("send_email", `{"to":"a@example.com","subject":"A"}`),
				llmtest.Call("send_email", `{"to":"b@example.com","subject":"B"}`),
				llmtest.Call("send_email", `{"to":"c@example.com","subject":"C"}`),
			),
			llmtest.Calls(llmtest.Call("send_email", `{"to":"d@example.com","subject":"D"}`)),
		}}
		rt.resolve = []llmtest.Reply{llmtest.Calls(llmtest.Call(approval.ResolveToolName, map[string]any{"decisions": []map[string]any{}}))}
		base := rt.script(t)
		spy := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
			if req.ToolChoice == approval.ResolveToolName {
				resolveIDs, _ = llmtest.PendingApprovalIDs(req)
			}
			resp, err := base.Complete(context.Background(), req)
			if err != nil {
				return llmtest.Fail(err)
			}
			return llmtest.Reply{Text: resp.Message.Content, ToolCalls: resp.Message.ToolCalls}
		})
		o := agentsOrch(t, spy, agent.Config{}, &emailAgent{}, &noteAgent{})
		ctx := context.Background()
		first, err := o.HandleMessage(ctx, msg("mail a, b and c"))
		if err != nil {
			t.Fatal(err)
		}
		if got := recipients(first.PendingApprovals); got != "a b c" {
			t.Fatalf("round %d: PendingApprovals in order %q, want the call order", round, got)
		}
		// A later message raises one more while the three wait.
		res, err := o.HandleMessage(ctx, msg("and mail d too"))
		if err != nil {
			t.Fatal(err)
		}
		list, _ := o.ListPendingApprovals(ctx, "u1")
		if a, b := recipients(res.PendingApprovals), recipients(list); a != "a b c d" || b != a {
			t.Fatalf("round %d: Result lists %q, ListPendingApprovals %q; want both \"a b c d\"", round, a, b)
		}
		if len(resolveIDs) != 3 {
			t.Fatalf("round %d: the approval call listed %v", round, resolveIDs)
		}
		for i, id := range resolveIDs {
			if id != first.PendingApprovals[i].ID {
				t.Fatalf("round %d: the approval call lists %v; the user was shown %v", round, resolveIDs, first.PendingApprovals)
			}
		}
	}
}

func recipients(reqs []approval.Request) string {
	var out []string
	for _, r := range reqs {
		out = append(out, strings.TrimSuffix(fmt.Sprint(r.Details["to"]), "@example.com"))
	}
	return strings.Join(out, " ")
}

// editDraft changes a pending approval's arguments behind the
// conversation's back, as another writer of the pool would.
func editDraft(t *testing.T, store pool.Store, id, fields string) {
	t.Helper()
	e, err := store.Get(context.Background(), "u1", id)
	if err != nil {
		t.Fatal(err)
	}
	e.Fields = json.RawMessage(fields)
	if err := store.Update(context.Background(), e); err != nil {
		t.Fatal(err)
	}
}

// After an edit, what a UI lists is the action that would run (rebuilt
// from the new arguments, with their fingerprint), never the old summary
// with a new fingerprint.
func TestListedApprovalIsRebuiltAfterAnEdit(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("Sent."),
	}}
	email := &emailAgent{}
	store := newPool(t, pool.MemoryConfig{})
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: store}, email, &noteAgent{})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("mail the team"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("res=%+v err=%v", first, err)
	}
	editDraft(t, store, first.PendingApprovals[0].ID, `{"to":"everyone@example.com","subject":"Plan"}`)
	list, err := o.ListPendingApprovals(ctx, "u1")
	if err != nil || len(list) != 1 {
		t.Fatal(list, err)
	}
	shown := list[0]
	if shown.ActionSummary != "Send an email to everyone@example.com" || shown.Details["to"] != "everyone@example.com" || shown.Fingerprint == first.PendingApprovals[0].Fingerprint {
		t.Fatalf("listed %+v; want the edited action with its own fingerprint", shown)
	}
	if _, err := o.ResolveApproval(ctx, "u1", shown.ID, approval.Decision{Action: approval.Approve, Fingerprint: shown.Fingerprint}); err != nil {
		t.Fatal(err)
	}
	if sent := email.Sent(); len(sent) != 1 || sent[0].To != "everyone@example.com" {
		t.Fatalf("sent %+v", sent)
	}
}

// A "yes" in the chat answers what the conversation showed: an action
// edited after it was shown does not run on it; it is shown again as it
// now is, and the next "yes" runs that.
func TestChatYesDoesNotRunAnActionEditedAfterItWasShown(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`)),
		llmtest.Text("It changed; please confirm again."),
		llmtest.Text("Sent."),
	}}
	email := &emailAgent{}
	store := newPool(t, pool.MemoryConfig{})
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: store}, email, &noteAgent{})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("mail the team"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("res=%+v err=%v", first, err)
	}
	editDraft(t, store, first.PendingApprovals[0].ID, `{"to":"everyone@example.com","subject":"Plan"}`)
	res, err := o.HandleMessage(ctx, msg("yes"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(email.Sent()); n != 0 {
		t.Fatalf("sent %d emails on a yes to a different action", n)
	}
	if len(res.PendingApprovals) != 1 || res.PendingApprovals[0].Details["to"] != "everyone@example.com" {
		t.Fatalf("res = %+v; want the edited action presented again", res)
	}
	if _, err := o.HandleMessage(ctx, msg("yes")); err != nil {
		t.Fatal(err)
	}
	if sent := email.Sent(); len(sent) != 1 || sent[0].To != "everyone@example.com" {
		t.Fatalf("after confirming the new action: sent %+v", sent)
	}
}

// editBeforeTake edits an entry's arguments just before the orchestrator
// takes it, as another writer of the pool racing the decision would.
type editBeforeTake struct {
	pool.Store
	fields string // set: the next TakeRevision is preceded by this edit
}

func (p *editBeforeTake) TakeRevision(ctx context.Context, tenant, id string, rev int64) (*pool.Entry, error) {
	if p.fields != "" {
		e, err := p.Store.Get(ctx, tenant, id)
		if err == nil {
			e.Fields = json.RawMessage(p.fields)
			err = p.Store.Update(ctx, e)
		}
		p.fields = ""
		if err != nil {
			return nil, err
		}
	}
	return p.Store.TakeRevision(ctx, tenant, id, rev)
}

// An edit that lands between the fingerprint check and the take makes the
// take fail (it is conditional on the revision checked); the entry is
// checked again, found stale, and stays pending: nothing is taken, nothing
// has to be put back, nothing runs.
func TestEditBetweenCheckAndTakeIsStaleAndKeepsTheEntry(t *testing.T) {
	rt := &router{loop: []llmtest.Reply{llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`))}}
	email := &emailAgent{}
	store := &editBeforeTake{Store: newPool(t, pool.MemoryConfig{})}
	o := agentsOrch(t, rt.script(t), agent.Config{Pool: store}, email, &noteAgent{})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("mail the team"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("res=%+v err=%v", first, err)
	}
	shown := first.PendingApprovals[0]
	store.fields = `{"to":"everyone@example.com","subject":"Plan"}`
	_, err = o.ResolveApproval(ctx, "u1", shown.ID, approval.Decision{Action: approval.Approve, Fingerprint: shown.Fingerprint})
	if !errors.Is(err, approval.ErrStale) {
		t.Fatalf("err = %v, want approval.ErrStale", err)
	}
	left, _ := o.ListPendingApprovals(ctx, "u1")
	if len(left) != 1 || left[0].Details["to"] != "everyone@example.com" || len(email.Sent()) != 0 {
		t.Fatalf("pending %+v, sent %+v: the edited approval must be pending and unsent", left, email.Sent())
	}
}
