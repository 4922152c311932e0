package llmtest_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// The tests below play scripts against the real orchestrator, as a user
// testing their own bot does.

type MailIn struct {
	To      string `json:"to" jsonschema:"description=Recipient email address,format=email"`
	Subject string `json:"subject,omitempty"`
}

// mailer sends mail once the user approves; the recipient may be edited.
type mailer struct {
	mu   sync.Mutex
	sent []string
}

func (m *mailer) Run(ctx context.Context, in MailIn) (agent.Reply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, in.To)
	return agent.Reply{Text: "Sent to " + in.To}, nil
}

func (m *mailer) Approval(in MailIn) *approval.Request {
	return &approval.Request{ActionSummary: "Send an email to " + in.To, AllowModification: true}
}

func (m *mailer) Sent() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sent)
}

type ForecastIn struct {
	City string `json:"city" jsonschema:"description=City name"`
}

// forecaster needs a city and no approval.
type forecaster struct{ cities []string }

func (f *forecaster) Run(ctx context.Context, in ForecastIn) (agent.Reply, error) {
	f.cities = append(f.cities, in.City)
	return agent.Reply{Text: "Sunny in " + in.City}, nil
}

func orchestrator(t *testing.T, model llm.Client, loop agent.LoopConfig) (*agent.Orchestrator, *mailer, *forecaster) {
	t.Helper()
	m, f := &mailer{}, &forecaster{}
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email for the user", m); err != nil {
		t.Fatal(err)
	}
	if err := agent.Register(reg, "forecast", "Tell the weather in a city", f); err != nil {
		t.Fatal(err)
	}
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Agents: reg, Loop: loop, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return o, m, f
}

func userSays(text string) agent.Message {
	return agent.Message{TenantID: "u1", ConversationID: "c1", Text: text}
}

func ids(reqs []approval.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.ID
	}
	return out
}

// Positions are the order in which the approvals were presented
// (Result.PendingApprovals) when one turn raised them one after another.
func TestDecideWithTheOrchestrator(t *testing.T) {
	model := llmtest.NewStrictScript(t,
		llmtest.Calls(
			llmtest.Call("send_email", `{"to":"team@example.com","subject":"Plan"}`),
			llmtest.Call("send_email", `{"to":"boss@example.com","subject":"Plan"}`),
			llmtest.Call("send_email", `{"to":"ops@example.com","subject":"Plan"}`),
		),
		llmtest.Text("Shall I send these three?"),
		llmtest.Decide(llmtest.Approve(0), llmtest.Cancel(1), llmtest.Edit(2, `{"to":"me@example.com"}`)),
		llmtest.Text("Sent two, dropped one."),
	)
	o, m, _ := orchestrator(t, model, agent.LoopConfig{MaxParallelTools: 1})
	ctx := t.Context()
	first, err := o.HandleMessage(ctx, userSays("mail the plan to team, boss and ops"))
	if err != nil {
		t.Fatal(err)
	}
	shown := first.PendingApprovals
	if first.Status != agent.StatusWaitingForApproval || len(shown) != 3 {
		t.Fatalf("first = %+v", first)
	}
	if got := []string{shown[0].ActionSummary, shown[1].ActionSummary, shown[2].ActionSummary}; !slices.Equal(got, []string{
		"Send an email to team@example.com", "Send an email to boss@example.com", "Send an email to ops@example.com",
	}) {
		t.Fatalf("presented %q, want the order of the calls", got)
	}
	listed, err := o.ListPendingApprovals(ctx, "u1")
	if err != nil || !slices.Equal(ids(listed), ids(shown)) {
		t.Fatalf("ListPendingApprovals = %v (%v), want the presented order %v", ids(listed), err, ids(shown))
	}

	res, err := o.HandleMessage(ctx, userSays("send the first, drop the second, and send the third to me instead"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != agent.StatusCompleted || res.Response != "Sent two, dropped one." {
		t.Fatalf("res = %+v", res)
	}
	if got := m.Sent(); !slices.Equal(got, []string{"team@example.com", "me@example.com"}) {
		t.Fatalf("sent %q", got)
	}
	var cancelled []string
	for _, r := range res.ToolCalls {
		if r.Error == "User cancelled this action." {
			cancelled = append(cancelled, r.ArgsSummary)
		}
	}
	if len(cancelled) != 1 || !strings.Contains(cancelled[0], "boss@example.com") {
		t.Fatalf("cancelled %q, want the boss's mail", cancelled)
	}

	// The approval call listed the ids in the presented order.
	var resolve *llm.Request
	for _, r := range model.Requests() {
		if r.ToolChoice == approval.ResolveToolName {
			resolve = &r
		}
	}
	if resolve == nil || len(resolve.Tools) != 1 || !strings.Contains(string(resolve.Tools[0].Parameters), `"enum":["`+strings.Join(ids(shown), `","`)+`"]`) {
		t.Fatalf("resolve request = %+v", resolve)
	}
}

// ApproveAll does not depend on the order, so parallel tool calls are fine.
func TestApproveAllWithTheOrchestrator(t *testing.T) {
	model := llmtest.NewStrictScript(t,
		llmtest.Calls(
			llmtest.Call("send_email", `{"to":"team@example.com"}`),
			llmtest.Call("send_email", `{"to":"boss@example.com"}`),
		),
		llmtest.Text("Send both?"),
		llmtest.ApproveAll(),
		llmtest.Text("Both sent."),
	)
	o, m, _ := orchestrator(t, model, agent.LoopConfig{})
	for _, text := range []string{"mail team and boss", "go ahead with both"} {
		if _, err := o.HandleMessage(t.Context(), userSays(text)); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Sent(); len(got) != 2 {
		t.Fatalf("sent %q", got)
	}
}

func TestProvideFieldsWithTheOrchestrator(t *testing.T) {
	model := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("forecast", `{}`)),
		llmtest.Text("Which city?"),
		llmtest.Unrelated(), // "thanks!" is not an answer
		llmtest.Text("You're welcome. Which city?"),
		llmtest.ProvideFields(`{"city":"Paris"}`),
		llmtest.Text("It is sunny in Paris."),
	)
	o, _, f := orchestrator(t, model, agent.LoopConfig{})
	var last *agent.Result
	for _, text := range []string{"what's the weather?", "thanks!", "Paris"} {
		res, err := o.HandleMessage(t.Context(), userSays(text))
		if err != nil {
			t.Fatal(err)
		}
		last = res
	}
	if !slices.Equal(f.cities, []string{"Paris"}) || last.Status != agent.StatusCompleted || last.Response != "It is sunny in Paris." {
		t.Fatalf("cities %q, last %+v", f.cities, last)
	}
}

// A helper that does not fit the call it gets fails the message, and a
// strict script reports it even when the bot swallows the error.
func TestMismatchWithTheOrchestrator(t *testing.T) {
	t.Run("Decide with nothing pending", func(t *testing.T) {
		ft := &fakeT{}
		model := llmtest.NewStrictScript(ft, llmtest.Decide(llmtest.Approve(0)))
		o, m, _ := orchestrator(t, model, agent.LoopConfig{})
		_, err := o.HandleMessage(t.Context(), userSays("yes, send it"))
		if !errors.Is(err, llmtest.ErrReplyMismatch) {
			t.Fatalf("err = %v, want ErrReplyMismatch", err)
		}
		if len(m.Sent()) != 0 {
			t.Fatal("something was sent")
		}
		if got := ft.end(); len(got) != 1 || !strings.Contains(got[0], "call 1 (loop): Decide(Approve(0)): the request has no resolve_approvals tool, so no approval is pending (its tools: send_email, forecast)") {
			t.Fatalf("reported %q", got)
		}
	})
	t.Run("Decide out of range", func(t *testing.T) {
		ft := &fakeT{}
		model := llmtest.NewStrictScript(ft,
			llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)),
			llmtest.Text("Send it?"),
			llmtest.Decide(llmtest.Cancel(1)),
		)
		o, m, _ := orchestrator(t, model, agent.LoopConfig{})
		if _, err := o.HandleMessage(t.Context(), userSays("mail the team")); err != nil {
			t.Fatal(err)
		}
		_, err := o.HandleMessage(t.Context(), userSays("not that one, the other one"))
		if !errors.Is(err, llmtest.ErrReplyMismatch) || !strings.Contains(err.Error(), "Cancel(1): no approval at position 1; 1 approval is pending, at position 0") {
			t.Fatalf("err = %v", err)
		}
		if len(m.Sent()) != 0 {
			t.Fatal("something was sent")
		}
		if left, _ := o.ListPendingApprovals(t.Context(), "u1"); len(left) != 1 {
			t.Fatalf("pending = %+v, want it untouched", left)
		}
		if got := ft.end(); len(got) != 1 || !strings.Contains(got[0], "call 3 (resolve_approvals): Cancel(1)") {
			t.Fatalf("reported %q", got)
		}
	})
	t.Run("Decide after a plain yes", func(t *testing.T) {
		// A plain "yes" to the one pending approval is decided without a
		// model call, so the Decide reply meets the next loop call: the
		// error says why instead of only that nothing is pending.
		ft := &fakeT{}
		model := llmtest.NewStrictScript(ft,
			llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)),
			llmtest.Text("Send it?"),
			llmtest.Decide(llmtest.Approve(0)),
			llmtest.Text("Sent."),
		)
		o, _, _ := orchestrator(t, model, agent.LoopConfig{})
		if _, err := o.HandleMessage(t.Context(), userSays("mail the team")); err != nil {
			t.Fatal(err)
		}
		_, err := o.HandleMessage(t.Context(), userSays("yes"))
		const want = "call 3 (loop): Decide(Approve(0)): the request has no resolve_approvals tool, so no approval is pending (its tools: send_email, forecast); " +
			"a plain yes or no reply to a single pending approval is decided without a model call, so the script should have no Decide or ApproveAll reply for it"
		if !errors.Is(err, llmtest.ErrReplyMismatch) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v\nwant it to contain %q", err, want)
		}
		// Reported first; the unused "Sent." reply is reported too.
		if got := ft.end(); len(got) == 0 || !strings.Contains(got[0], want) {
			t.Fatalf("reported %q", got)
		}
	})
	t.Run("ProvideFields when an approval is pending", func(t *testing.T) {
		ft := &fakeT{}
		model := llmtest.NewStrictScript(ft,
			llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)),
			llmtest.Text("Send it?"),
			llmtest.ProvideFields(`{"city":"Paris"}`),
		)
		o, _, _ := orchestrator(t, model, agent.LoopConfig{})
		if _, err := o.HandleMessage(t.Context(), userSays("mail the team")); err != nil {
			t.Fatal(err)
		}
		_, err := o.HandleMessage(t.Context(), userSays("Paris"))
		if !errors.Is(err, llmtest.ErrReplyMismatch) || !strings.Contains(err.Error(), `ProvideFields: the request has no provide_fields tool, so no agent waits for input (its tools: resolve_approvals; tool choice "resolve_approvals")`) {
			t.Fatalf("err = %v", err)
		}
		if got := ft.end(); len(got) != 1 {
			t.Fatalf("reported %q", got)
		}
	})
}

// The friction strict mode removes: a script one reply short (no reply for
// the call that phrases the approval question) passes unnoticed, because
// the orchestrator falls back to the agent's own prompt.
func TestStrictCatchesTheQuietFallback(t *testing.T) {
	ft := &fakeT{}
	model := llmtest.NewStrictScript(ft, llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)))
	o, _, _ := orchestrator(t, model, agent.LoopConfig{})
	res, err := o.HandleMessage(t.Context(), userSays("mail the team"))
	if err != nil || res.Status != agent.StatusWaitingForApproval || res.Response == "" {
		t.Fatalf("the orchestrator fell back quietly before: %+v, %v", res, err)
	}
	if got := ft.end(); !slices.Equal(got, []string{"llmtest: script exhausted: call 2 (phrase) had no reply (1 scripted)"}) {
		t.Fatalf("reported %q", got)
	}
}

// Positions are the order of Result.PendingApprovals, also when a message
// raises an approval while an older one waits.
func TestDecidePositionsFollowPendingApprovals(t *testing.T) {
	model := llmtest.NewStrictScript(t,
		llmtest.Calls(llmtest.Call("send_email", `{"to":"team@example.com"}`)),
		llmtest.Text("Send it?"),
		llmtest.Decide(), // "and the boss too" decides nothing
		llmtest.Calls(llmtest.Call("send_email", `{"to":"boss@example.com"}`)),
		llmtest.Text("Send both?"),
	)
	o, _, _ := orchestrator(t, model, agent.LoopConfig{MaxParallelTools: 1})
	if _, err := o.HandleMessage(t.Context(), userSays("mail the team")); err != nil {
		t.Fatal(err)
	}
	res, err := o.HandleMessage(t.Context(), userSays("and the boss too"))
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := o.ListPendingApprovals(t.Context(), "u1")
	if !slices.Equal(ids(res.PendingApprovals), ids(listed)) {
		t.Fatalf("presented %v, listed %v", ids(res.PendingApprovals), ids(listed))
	}
}
