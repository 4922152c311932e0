package agent_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/tool"
)

// stepLog records every step it observes.
type stepLog struct {
	mu    sync.Mutex
	steps []agent.Step
}

func (l *stepLog) Observe(_ context.Context, s agent.Step) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s.Request.Messages != nil {
		s.Request.Messages = slices.Clone(s.Request.Messages) // steps are not kept by reference
	}
	l.steps = append(l.steps, s)
}

func (l *stepLog) all() []agent.Step {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.steps)
}

func (l *stepLog) kinds() []string {
	var out []string
	for _, s := range l.all() {
		out = append(out, s.Kind.String())
	}
	return out
}

func (l *stepLog) of(k agent.StepKind) []agent.Step {
	var out []agent.Step
	for _, s := range l.all() {
		if s.Kind == k {
			out = append(out, s)
		}
	}
	return out
}

// A run with a tool call reports every step, in order, with the run's
// identity and a Seq counting from 1: what Stream never shows (the model's
// requests and responses) included.
func TestObserverHearsEveryStepInOrder(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`)),
		llmtest.Text("It is sunny in Paris."),
	)
	var log stepLog
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}, Observer: &log})
	res, err := o.HandleMessage(context.Background(), msg("Weather in Paris?"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"run_start", "model_request", "model_response", "tool_call", "tool_result", "model_request", "model_response", "run_end"}
	if got := log.kinds(); !slices.Equal(got, want) {
		t.Fatalf("steps %v\nwant  %v", got, want)
	}
	steps := log.all()
	for i, st := range steps {
		if st.Seq != i+1 || st.RunID != res.RunID || st.TenantID != "u1" || st.ConversationID != "c1" || st.Time.IsZero() {
			t.Fatalf("step %d (%s): seq %d run %q tenant %q conv %q time %v; want seq %d of run %q", i, st.Kind, st.Seq, st.RunID, st.TenantID, st.ConversationID, st.Time, i+1, res.RunID)
		}
	}
	if m := steps[0].Message; m == nil || m.Text != "Weather in Paris?" {
		t.Fatalf("run_start message %+v", m)
	}
	req := steps[1].Request
	if steps[1].Call != 1 || req.Purpose != llm.PurposeLoop || len(req.Tools) != 1 || req.Messages[len(req.Messages)-1].Content != "Weather in Paris?" {
		t.Fatalf("first request: call %d purpose %q tools %d messages %+v", steps[1].Call, req.Purpose, len(req.Tools), req.Messages)
	}
	if r := steps[2]; r.Call != 1 || r.Response == nil || len(r.Response.Message.ToolCalls) != 1 || r.Err != nil || r.Request.Purpose != llm.PurposeLoop {
		t.Fatalf("first response %+v", r)
	}
	if c := steps[3].ToolCall; c.Name != "get_weather" || string(c.Arguments) != `{"city":"Paris"}` {
		t.Fatalf("tool call %+v", c)
	}
	if r := steps[4]; r.Text != "Sunny, 21°C in Paris" || r.Record.ResultStatus != "completed" || r.Record.Name != "get_weather" || r.ToolCall.ID != steps[3].ToolCall.ID {
		t.Fatalf("tool result %+v", r)
	}
	if steps[5].Call != 2 || steps[5].Request.Messages[len(steps[5].Request.Messages)-1].Role != llm.RoleTool {
		t.Fatalf("second request %+v", steps[5])
	}
	end := steps[7]
	if end.Result == nil || end.Result.Response != "It is sunny in Paris." || end.Result.Status != agent.StatusCompleted || end.Err != nil || end.Duration <= 0 {
		t.Fatalf("run_end %+v", end)
	}
}

// A streamed run is observed the same way.
func TestObserverHearsStreamedRun(t *testing.T) {
	var log stepLog
	o := newOrch(t, llmtest.NewScript(llmtest.Text("hello there")), agent.Config{Observer: &log})
	for _, err := range o.Stream(context.Background(), msg("hi")) {
		if err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"run_start", "model_request", "model_response", "run_end"}
	if got := log.kinds(); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if r := log.of(agent.StepModelResponse)[0].Response; r == nil || r.Message.Content != "hello there" {
		t.Fatalf("response %+v", r)
	}
}

// A rate-limited call shows as a failed response, a retry with the error's
// kind, then the request again.
func TestObserverHearsRetries(t *testing.T) {
	limited := &llm.Error{Kind: llm.KindRateLimited, Message: "slow down"}
	var log stepLog
	o := newOrch(t, llmtest.NewScript(llmtest.Fail(limited), llmtest.Text("done")), agent.Config{Loop: fastRetries, Observer: &log})
	if _, err := o.HandleMessage(context.Background(), msg("hi")); err != nil {
		t.Fatal(err)
	}
	want := []string{"run_start", "model_request", "model_response", "model_retry", "model_request", "model_response", "run_end"}
	if got := log.kinds(); !slices.Equal(got, want) {
		t.Fatalf("steps %v\nwant  %v", got, want)
	}
	steps := log.all()
	if failed := steps[2]; failed.Response != nil || !errors.Is(failed.Err, limited) || failed.Call != 1 {
		t.Fatalf("failed response %+v", failed)
	}
	if r := steps[3]; r.Retry != 1 || r.ErrorKind != llm.KindRateLimited || r.Call != 1 || r.Delay <= 0 {
		t.Fatalf("retry %+v", r)
	}
	if steps[4].Call != 2 {
		t.Fatalf("the retried request is call %d, want 2", steps[4].Call)
	}
}

// An approval raised by an Agent-Tool and decided by the user's next
// message are both steps.
func TestObserverHearsApprovals(t *testing.T) {
	var log stepLog
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("send_email", `{"to":"bob@example.com","subject":"Hi"}`)),
		llmtest.Text("Shall I send it?"),
		llmtest.Text("Sent."),
	)
	email := &emailAgent{}
	o := agentsOrch(t, s, agent.Config{Observer: &log}, email, &noteAgent{})
	res, err := o.HandleMessage(context.Background(), msg("Mail Bob"))
	if err != nil || res.Status != agent.StatusWaitingForApproval {
		t.Fatalf("%+v, %v", res, err)
	}
	raised := log.of(agent.StepApprovalRaised)
	if len(raised) != 1 || raised[0].Approval == nil || raised[0].Approval.ID != res.PendingApprovals[0].ID || raised[0].RunID != res.RunID {
		t.Fatalf("raised %+v; pending %+v", raised, res.PendingApprovals)
	}
	res2, err := o.HandleMessage(context.Background(), msg("yes"))
	if err != nil {
		t.Fatal(err)
	}
	decided := log.of(agent.StepApprovalDecided)
	if len(decided) != 1 || decided[0].Decided.ID != res.PendingApprovals[0].ID || decided[0].Decided.Action != approval.Approve || decided[0].RunID != res2.RunID {
		t.Fatalf("decided %+v", decided)
	}
	if len(email.Sent()) != 1 {
		t.Fatal("the approved email was not sent")
	}
	// The approved action's run is a tool call and result of the second
	// run, after the decision.
	var second []agent.Step
	for _, st := range log.all() {
		if st.RunID == res2.RunID {
			second = append(second, st)
		}
	}
	at := slices.IndexFunc(second, func(s agent.Step) bool { return s.Kind == agent.StepApprovalDecided })
	call := slices.IndexFunc(second, func(s agent.Step) bool { return s.Kind == agent.StepToolCall && s.ToolCall.Name == "send_email" })
	result := slices.IndexFunc(second, func(s agent.Step) bool { return s.Kind == agent.StepToolResult && s.Record.Resumed })
	if at < 0 || call < at || result < call || second[result].Text != "Email sent to bob@example.com" {
		t.Fatalf("second run's steps: decided at %d, call at %d, result at %d: %+v", at, call, result, second)
	}
}

// Recalled items are a step, with their scores.
func TestObserverHearsRecall(t *testing.T) {
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Remember(context.Background(), "u1", memory.Item{Text: "Their dentist is Dr. Kim", Origin: memory.OriginUser}); err != nil {
		t.Fatal(err)
	}
	var log stepLog
	o := newOrch(t, llmtest.NewScript(llmtest.Text("Dr. Kim.")), agent.Config{Memory: mem, Observer: &log})
	if _, err := o.HandleMessage(context.Background(), msg("Who is my dentist?")); err != nil {
		t.Fatal(err)
	}
	rec := log.of(agent.StepRecall)
	if len(rec) != 1 || len(rec[0].Recalled) != 1 || rec[0].Recalled[0].Text != "Their dentist is Dr. Kim" || rec[0].Recalled[0].Score <= 0 {
		t.Fatalf("recall steps %+v", rec)
	}
	if k := log.kinds(); k[1] != "recall" {
		t.Fatalf("recall is not before the first request: %v", k)
	}
}

// A SpendGuard's refusal is a step before the run's end, with the reason
// the user is shown; no model call is made.
func TestObserverHearsSpendRefusal(t *testing.T) {
	var log stepLog
	o := newOrch(t, llmtest.NewScript(llmtest.Text("never")), agent.Config{SpendGuard: reasonGuard{}, Observer: &log})
	res, err := o.HandleMessage(context.Background(), msg("hi"))
	if !errors.Is(err, agent.ErrSpendRefused) {
		t.Fatalf("err = %v", err)
	}
	want := []string{"run_start", "spend_refused", "run_end"}
	if got := log.kinds(); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	ref := log.of(agent.StepSpendRefused)[0]
	if ref.Text != res.Response || !errors.Is(ref.Err, agent.ErrSpendRefused) {
		t.Fatalf("refusal step %+v; response %q", ref, res.Response)
	}
	if end := log.of(agent.StepRunEnd)[0]; end.Result.Status != agent.StatusRefused || !errors.Is(end.Err, agent.ErrSpendRefused) {
		t.Fatalf("run_end %+v", end)
	}
}

// A budget's last call without tools is preceded by the note the model
// is given.
func TestObserverHearsNotes(t *testing.T) {
	var log stepLog
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`)),
		llmtest.Text("Sunny."),
	)
	o := newOrch(t, s, agent.Config{Tools: []tool.Tool{weatherTool()}, Loop: agent.LoopConfig{MaxTurns: 1}, Observer: &log})
	if _, err := o.HandleMessage(context.Background(), msg("Weather?")); err != nil {
		t.Fatal(err)
	}
	notes := log.of(agent.StepNote)
	if len(notes) != 1 || !strings.Contains(notes[0].Text, "every step available") {
		t.Fatalf("notes %+v", notes)
	}
	reqs := log.of(agent.StepModelRequest)
	if last := reqs[len(reqs)-1]; last.Request.Purpose != llm.PurposeFinal || last.Seq < notes[0].Seq {
		t.Fatalf("the last call (%+v) does not follow the note", last)
	}
}

// StepKind names round-trip through text, unknown kinds included.
func TestStepKindText(t *testing.T) {
	for k := agent.StepRunStart; k <= agent.StepSpendRefused+2; k++ {
		b, _ := k.MarshalText()
		var back agent.StepKind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Fatalf("%d → %q → %d, %v", k, b, back, err)
		}
	}
	var k agent.StepKind
	if err := k.UnmarshalText([]byte("bogus")); err == nil {
		t.Fatal("an unknown name was accepted")
	}
}

// An observer that does nothing costs a run no allocation.
func TestObserverNoopAllocatesNothing(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts (the race detector allocates on its own)")
	}
	count := func(obs agent.Observer) float64 {
		s := llmtest.NewScriptFunc(func(llm.Request) llmtest.Reply { return llmtest.Text("ok") })
		o := newOrch(t, s, agent.Config{Observer: obs})
		ctx := context.Background()
		return testing.AllocsPerRun(50, func() {
			if _, err := o.HandleMessage(ctx, msg("hi")); err != nil {
				t.Fatal(err)
			}
		})
	}
	none := count(nil)
	noop := count(agent.ObserverFunc(func(context.Context, agent.Step) {}))
	if noop > none {
		t.Fatalf("a no-op observer costs %.1f allocations per run (%.1f without one)", noop-none, none)
	}
}
