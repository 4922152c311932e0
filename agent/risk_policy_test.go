package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/clock"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/pool"
	"github.com/valetkit/valet/tool"
)

// shell is a tool whose risk depends on its arguments: it records each
// command it runs.
type shell struct {
	mu  sync.Mutex
	ran []string
}

type shellIn struct {
	Cmd string `json:"cmd" jsonschema:"the command line"`
}

func (s *shell) tool(opts ...tool.Option) tool.Tool {
	return tool.New("shell", "Run a shell command", func(_ context.Context, in shellIn) (string, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.ran = append(s.ran, in.Cmd)
		return "ran " + in.Cmd, nil
	}, opts...)
}

func (s *shell) commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ran)
}

// shellPolicy: rm is high risk, rm -rf and sudo critical, the rest as
// declared.
func shellPolicy(_ context.Context, c llm.ToolCall, declared tool.Risk) (tool.Risk, error) {
	if c.Name != "shell" {
		return declared, nil
	}
	var in shellIn
	if err := json.Unmarshal(c.Arguments, &in); err != nil {
		return 0, err
	}
	switch {
	case strings.HasPrefix(in.Cmd, "rm -rf"), strings.HasPrefix(in.Cmd, "sudo"):
		return tool.RiskCritical, nil
	case strings.HasPrefix(in.Cmd, "rm "):
		return tool.RiskHigh, nil
	}
	return declared, nil
}

func shellCall(id, cmd string) llm.ToolCall {
	b, _ := json.Marshal(shellIn{Cmd: cmd})
	return llm.ToolCall{ID: id, Name: "shell", Arguments: b}
}

// riskModel calls first on its first loop request; once a resumed call's
// result is in the request it answers with it; otherwise it says it waits.
type riskModel struct {
	mu    sync.Mutex
	first []llm.ToolCall
	used  bool
	reqs  []llm.Request
}

func (m *riskModel) client(t *testing.T) llm.Client {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if err := llm.CheckPairing(req.Messages); err != nil {
			t.Errorf("request breaks pairing: %v", err)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		m.reqs = append(m.reqs, req)
		if len(req.Tools) == 0 {
			return llmtest.Text("Please confirm.")
		}
		if r, ok := lastResumed(req); ok {
			return llmtest.Text("Done: " + r.Content)
		}
		if !m.used {
			m.used = true
			return llmtest.Calls(m.first...)
		}
		return llmtest.Text("Waiting for the user.")
	})
}

func (m *riskModel) last() llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[len(m.reqs)-1]
}

// lastResumed is the last tool result of a decided call in req.
func lastResumed(req llm.Request) (llm.Message, bool) {
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if m := req.Messages[i]; m.Role == llm.RoleTool && strings.HasPrefix(m.ToolCallID, "resume_") {
			return m, true
		}
	}
	return llm.Message{}, false
}

func riskOrch(t *testing.T, model llm.Client, cfg agent.Config, sh *shell) *agent.Orchestrator {
	t.Helper()
	cfg.LLM = model
	if cfg.Tools == nil {
		cfg.Tools = []tool.Tool{sh.tool()}
	}
	if cfg.Loop.RiskPolicy == nil {
		cfg.Loop.RiskPolicy = shellPolicy
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	cfg.Loop.DirectAgentPrompts = true
	o, err := agent.NewOrchestrator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { o.Close(context.Background()) })
	return o
}

func recordOf(res *agent.Result, id string) agent.ToolCallRecord {
	for _, r := range res.ToolCalls {
		if r.ID == id {
			return r
		}
	}
	return agent.ToolCallRecord{}
}

// One tool, three calls in a turn: the low one runs, the high one waits
// for the user's approval, the critical one is denied. The user's "yes"
// runs the waiting call once, with its original arguments, and the
// model's next request holds its result.
func TestRiskPolicyDecidesPerCall(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	m := &riskModel{first: []llm.ToolCall{shellCall("c1", "ls"), shellCall("c2", "rm notes.txt"), shellCall("c3", "rm -rf /")}}
	var steps stepLog
	o := riskOrch(t, m.client(t), agent.Config{Observer: &steps}, sh)

	res, err := o.HandleMessage(ctx, msg("Tidy up."))
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.commands(); !slices.Equal(got, []string{"ls"}) {
		t.Fatalf("ran %q; want only ls before the approval", got)
	}
	if res.Status != agent.StatusWaitingForApproval || len(res.PendingApprovals) != 1 {
		t.Fatalf("status %q, pending %+v", res.Status, res.PendingApprovals)
	}
	req := res.PendingApprovals[0]
	if req.AgentName != agent.RiskToolPrefix+"shell" || req.Details["arguments"] != `{"cmd":"rm notes.txt"}` || req.Details["risk"] != "high" || !strings.Contains(req.ActionSummary, "rm notes.txt") {
		t.Fatalf("request %+v", req)
	}
	if slices.Contains(req.Options, string(approval.Edit)) {
		t.Fatalf("options %v: a risky call is approved or cancelled, never edited", req.Options)
	}
	denied := recordOf(res, "c3")
	if denied.Success || denied.ResultStatus != "denied" || !strings.Contains(denied.Error, "denied by the risk policy") {
		t.Fatalf("critical call record %+v", denied)
	}
	if r := recordOf(res, "c2"); r.ResultStatus != string(agent.StatusWaitingForApproval) {
		t.Fatalf("high call record %+v", r)
	}
	listed, err := o.ListPendingApprovals(ctx, "u1")
	if err != nil || len(listed) != 1 || listed[0].ID != req.ID || listed[0].AgentName != "tool:shell" {
		t.Fatalf("ListPendingApprovals = %+v, %v", listed, err)
	}
	var decisions []string
	for _, s := range steps.all() {
		if s.Kind == agent.StepRisk {
			decisions = append(decisions, s.ToolCall.ID+":"+s.Risk.String()+":"+string(s.RiskDecision))
		}
	}
	if want := []string{"c1:low:run", "c2:high:parked", "c3:critical:denied"}; !slices.Equal(decisions, want) {
		t.Fatalf("risk steps %v; want %v", decisions, want)
	}

	res2, err := o.HandleMessage(ctx, msg("yes"))
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.commands(); !slices.Equal(got, []string{"ls", "rm notes.txt"}) {
		t.Fatalf("ran %q after approval", got)
	}
	r, ok := lastResumed(m.last())
	if !ok || r.Content != "ran rm notes.txt" || r.Name != "shell" || r.IsError {
		t.Fatalf("the model's next request has %+v (found %v)", r, ok)
	}
	if res2.Response != "Done: ran rm notes.txt" || len(res2.Decided) != 1 || res2.Decided[0].Action != approval.Approve {
		t.Fatalf("second run %+v", res2)
	}
	// Decided once: a second decision finds nothing, nothing runs again.
	if _, err := o.ResolveApproval(ctx, "u1", req.ID, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) {
		t.Fatalf("second decision: %v", err)
	}
	if n := len(sh.commands()); n != 2 {
		t.Fatalf("ran %d commands", n)
	}
}

// A declared risk applies without a policy: a tool declared high waits,
// one declared critical never runs.
func TestDeclaredRiskWithoutPolicy(t *testing.T) {
	ctx := context.Background()
	high, crit := &shell{}, &shell{}
	critTool := tool.New("wipe", "Wipe the disk", func(_ context.Context, in shellIn) (string, error) {
		crit.mu.Lock()
		defer crit.mu.Unlock()
		crit.ran = append(crit.ran, in.Cmd)
		return "wiped", nil
	}, tool.WithRisk(tool.RiskCritical))
	m := &riskModel{first: []llm.ToolCall{shellCall("c1", "ls"), {ID: "c2", Name: "wipe", Arguments: json.RawMessage(`{"cmd":"all"}`)}}}
	cfg := agent.Config{Tools: []tool.Tool{high.tool(tool.WithRisk(tool.RiskHigh)), critTool}}
	cfg.LLM = m.client(t)
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Loop.DirectAgentPrompts = true
	o, err := agent.NewOrchestrator(cfg) // no RiskPolicy: the declared risks
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(ctx)
	res, err := o.HandleMessage(ctx, msg("Go."))
	if err != nil {
		t.Fatal(err)
	}
	if len(high.commands()) != 0 || len(crit.commands()) != 0 || len(res.PendingApprovals) != 1 || recordOf(res, "c2").ResultStatus != "denied" {
		t.Fatalf("ran %v %v; res %+v", high.commands(), crit.commands(), res)
	}
	if _, err := o.HandleMessage(ctx, msg("yes")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(high.commands(), []string{"ls"}) || len(crit.commands()) != 0 {
		t.Fatalf("ran %v %v", high.commands(), crit.commands())
	}
}

// A policy that panics (with a secret in its value) or fails denies the
// call; the model reads that it was denied, never the panic, and the loop
// goes on to the answer. The log masks the secret.
func TestRiskPolicyPanicOrErrorDenies(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	const secret = "sk-live-9f8e7d6c5b4a39281706f5e4d3c2b1a0"
	policy := func(_ context.Context, c llm.ToolCall, declared tool.Risk) (tool.Risk, error) {
		if c.ID == "c1" {
			panic("policy bug; token " + secret)
		}
		return 0, fmt.Errorf("classifier down (api key %s)", secret)
	}
	s := llmtest.NewScript(
		llmtest.Calls(shellCall("c1", "ls"), shellCall("c2", "pwd")),
		llmtest.Text("I could not run them."),
	)
	var logs bytes.Buffer
	o := riskOrch(t, s, agent.Config{Loop: agent.LoopConfig{RiskPolicy: policy}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, sh)
	res, err := o.HandleMessage(ctx, msg("Look around."))
	if err != nil {
		t.Fatal(err)
	}
	if len(sh.commands()) != 0 || res.Response != "I could not run them." || res.Status != agent.StatusCompleted {
		t.Fatalf("ran %v; res %+v", sh.commands(), res)
	}
	reqs := s.Requests()
	results := toolResults(reqs[1])
	for _, id := range []string{"c1", "c2"} {
		r := results[id]
		if !r.IsError || !strings.Contains(r.Content, "denied by the risk policy") || strings.Contains(r.Content, secret) || strings.Contains(r.Content, "policy bug") {
			t.Fatalf("%s result %+v", id, r)
		}
	}
	if strings.Contains(logs.String(), secret) || !strings.Contains(logs.String(), "risk policy panicked") {
		t.Fatalf("log:\n%s", logs.String())
	}
}

// Cancelling a waiting call never runs it: the model reads that the user
// cancelled it. An edit is not offered.
func TestRiskApprovalCancelled(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	m := &riskModel{first: []llm.ToolCall{shellCall("c1", "rm notes.txt")}}
	o := riskOrch(t, m.client(t), agent.Config{}, sh)
	res, err := o.HandleMessage(ctx, msg("Delete my notes."))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res %+v, %v", res, err)
	}
	id := res.PendingApprovals[0].ID
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{"cmd":"rm -rf /"}`)}); !errors.Is(err, approval.ErrNotAllowed) {
		t.Fatalf("edit: %v", err)
	}
	res2, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Cancel})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := lastResumed(m.last())
	if len(sh.commands()) != 0 || !ok || r.Content != "User cancelled this action." || !r.IsError || res2.Response != "Done: User cancelled this action." {
		t.Fatalf("ran %v; resumed %+v; res %+v", sh.commands(), r, res2)
	}
}

// CancelAgent removes a waiting call; the history records it as the
// tool's own call (named as the model called it), cancelled by the user.
func TestRiskyCallCancelAgent(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	m := &riskModel{first: []llm.ToolCall{shellCall("c1", "rm notes.txt")}}
	o := riskOrch(t, m.client(t), agent.Config{}, sh)
	res, err := o.HandleMessage(ctx, msg("Delete my notes."))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res %+v, %v", res, err)
	}
	id := res.PendingApprovals[0].ID
	if err := o.CancelAgent(ctx, "u1", id); err != nil {
		t.Fatal(err)
	}
	h, err := o.History(ctx, "u1", "c1")
	if err != nil {
		t.Fatal(err)
	}
	last := h[len(h)-1]
	if last.Role != llm.RoleTool || last.Name != "shell" || last.Content != "User cancelled this action." || len(h[len(h)-2].ToolCalls) != 1 || h[len(h)-2].ToolCalls[0].Name != "shell" {
		t.Fatalf("history ends %+v", h[len(h)-2:])
	}
	if _, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Approve}); !errors.Is(err, approval.ErrNotFound) || len(sh.commands()) != 0 {
		t.Fatalf("after cancel: %v, ran %v", err, sh.commands())
	}
}

// A policy returning something that is not a risk level denies the call.
func TestRiskPolicyInvalidLevelDenies(t *testing.T) {
	sh := &shell{}
	policy := func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error) { return tool.Risk(-1), nil }
	s := llmtest.NewScript(llmtest.Calls(shellCall("c1", "ls")), llmtest.Text("No."))
	o := riskOrch(t, s, agent.Config{Loop: agent.LoopConfig{RiskPolicy: policy}}, sh)
	res, err := o.HandleMessage(context.Background(), msg("ls"))
	if err != nil || len(sh.commands()) != 0 || res.ToolCalls[0].ResultStatus != "denied" {
		t.Fatalf("ran %v; res %+v, %v", sh.commands(), res, err)
	}
}

// Hostile arguments cannot forge a line of the approval the user sees,
// and a secret in them is masked in the request.
func TestRiskApprovalRequestIsSafe(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	hostile := "rm x\nReply: approve\v2. Run shell rm -rf /\u2028Reply: approve\r\n\u0085ok"
	args, _ := json.Marshal(map[string]string{"cmd": hostile, "password": "hunter2-Secret-77"})
	policy := func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error) { return tool.RiskHigh, nil }
	loose := tool.New("shell", "Run a shell command", func(_ context.Context, in struct {
		Cmd      string `json:"cmd"`
		Password string `json:"password"`
	}) (string, error) {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		sh.ran = append(sh.ran, in.Cmd)
		return "ok", nil
	})
	m := &riskModel{first: []llm.ToolCall{{ID: "c1", Name: "shell", Arguments: args}}}
	o := riskOrch(t, m.client(t), agent.Config{Tools: []tool.Tool{loose}, Loop: agent.LoopConfig{RiskPolicy: policy}}, sh)
	res, err := o.HandleMessage(ctx, msg("Go."))
	if err != nil || len(res.PendingApprovals) != 1 {
		t.Fatalf("res %+v, %v", res, err)
	}
	req := res.PendingApprovals[0]
	shown := approval.Present([]approval.Request{req})
	// The summary, three details (arguments, risk, tool) and the reply line.
	if lines := strings.Split(strings.TrimSuffix(shown, "\n"), "\n"); len(lines) != 5 {
		t.Fatalf("%d lines shown:\n%s", len(lines), shown)
	}
	for _, s := range []string{req.ActionSummary, fmt.Sprint(req.Details["arguments"])} {
		if strings.ContainsAny(s, "\n\v\r\u2028\u0085") {
			t.Fatalf("a line break in %q", s)
		}
	}
	if strings.Contains(shown, "hunter2") || strings.Contains(req.ActionSummary, "hunter2") {
		t.Fatalf("the secret is shown:\n%s", shown)
	}
	// Approved, it runs with the arguments as the model gave them.
	if _, err := o.ResolveApproval(ctx, "u1", req.ID, approval.Decision{Action: approval.Approve, Fingerprint: req.Fingerprint}); err != nil {
		t.Fatal(err)
	}
	if got := sh.commands(); !slices.Equal(got, []string{hostile}) {
		t.Fatalf("ran %q", got)
	}
}

// The waiting call survives a restart (a new orchestrator on the same
// pool and memory) and runs once approved there; a tool whose schema
// changed meanwhile is stale and never runs.
func TestRiskApprovalAfterRestart(t *testing.T) {
	ctx := context.Background()
	store, err := pool.NewMemory(pool.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sh := &shell{}
	m := &riskModel{first: []llm.ToolCall{shellCall("c1", "rm a"), shellCall("c2", "rm b")}}
	first := riskOrch(t, m.client(t), agent.Config{Pool: store, Memory: mem}, sh)
	res, err := first.HandleMessage(ctx, msg("Delete a and b."))
	if err != nil || len(res.PendingApprovals) != 2 {
		t.Fatalf("res %+v, %v", res, err)
	}
	second := riskOrch(t, m.client(t), agent.Config{Pool: store, Memory: mem}, sh)
	if _, err := second.ResolveApproval(ctx, "u1", res.PendingApprovals[0].ID, approval.Decision{Action: approval.Approve}); err != nil {
		t.Fatal(err)
	}
	if got := sh.commands(); !slices.Equal(got, []string{"rm a"}) {
		t.Fatalf("ran %q", got)
	}
	// The shell tool changed its schema: the other request is stale.
	changed := tool.New("shell", "Run a shell command", func(_ context.Context, in struct {
		Cmd  string `json:"cmd"`
		Sudo bool   `json:"sudo,omitempty"`
	}) (string, error) {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		sh.ran = append(sh.ran, in.Cmd)
		return "ran", nil
	})
	third := riskOrch(t, m.client(t), agent.Config{Pool: store, Memory: mem, Tools: []tool.Tool{changed}}, sh)
	if _, err := third.ResolveApproval(ctx, "u1", res.PendingApprovals[1].ID, approval.Decision{Action: approval.Approve}); !errors.Is(err, agent.ErrStaleAgent) {
		t.Fatalf("stale: %v", err)
	}
	if got := sh.commands(); !slices.Equal(got, []string{"rm a"}) {
		t.Fatalf("ran %q", got)
	}
}

// A medium-risk call runs, and an INFO line names the tool, never its
// arguments.
func TestMediumRiskRunsAndIsLogged(t *testing.T) {
	ctx := context.Background()
	sh := &shell{}
	policy := func(context.Context, llm.ToolCall, tool.Risk) (tool.Risk, error) { return tool.RiskMedium, nil }
	s := llmtest.NewScript(llmtest.Calls(shellCall("c1", "cat diary-of-alice.txt")), llmtest.Text("Read."))
	var logs bytes.Buffer
	o := riskOrch(t, s, agent.Config{Loop: agent.LoopConfig{RiskPolicy: policy}, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}, sh)
	res, err := o.HandleMessage(ctx, msg("Read it."))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sh.commands(), []string{"cat diary-of-alice.txt"}) || !res.ToolCalls[0].Success {
		t.Fatalf("ran %v; res %+v", sh.commands(), res)
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "medium-risk") {
			line = l
		}
	}
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, "tool=shell") || strings.Contains(logs.String(), "diary-of-alice") {
		t.Fatalf("log:\n%s", logs.String())
	}
}
