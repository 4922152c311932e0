package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/valetkit/valet/clock"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

type PayIn struct {
	To     string `json:"to" jsonschema:"description=Who is paid"`
	Amount int    `json:"amount" jsonschema:"description=How much"`
}

// payAgent asks for approval; its Approval panics with a text holding an
// access token when the amount is over 100.
type payAgent struct{}

func (payAgent) Run(ctx context.Context, in PayIn) (agent.Reply, error) {
	return agent.Reply{Text: "paid"}, nil
}

func (payAgent) Approval(in PayIn) *approval.Request {
	if in.Amount > 100 {
		panic(leakyText)
	}
	return &approval.Request{ActionSummary: fmt.Sprintf("Pay %d to %s", in.Amount, in.To), AllowModification: true}
}

// An Agent-Tool whose Approval panics when the user edits the action does
// not show the panic's text (a URL with its access token) to the user, the
// model or the pool's listing: a panic is "internal error" everywhere but
// the logger, whichever path reached it.
func TestApprovalPanicOnEditDoesNotLeakItsText(t *testing.T) {
	s := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("pay", `{"to":"Bob","amount":50}`)),
		llmtest.Text("Shall I pay Bob 50?"),
		llmtest.Text("Something went wrong."),
		llmtest.Text("Something went wrong."),
	)
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "pay", "Pay someone", payAgent{}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	o := newOrch(t, paired{t, s}, agent.Config{
		Agents: reg, Memory: newMem(t, memory.Config{}), Clock: clock.System{},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	ctx := context.Background()
	first, err := o.HandleMessage(ctx, msg("Pay Bob 50"))
	if err != nil || len(first.PendingApprovals) != 1 {
		t.Fatalf("res=%+v err=%v", first, err)
	}
	id := first.PendingApprovals[0].ID
	res, err := o.ResolveApproval(ctx, "u1", id, approval.Decision{Action: approval.Edit, Fields: json.RawMessage(`{"amount":500}`)})
	seen := fmt.Sprintf("%v %+v", err, res)
	if res != nil {
		b, _ := json.Marshal(res)
		seen += string(b)
	}
	waits, _ := o.PendingAgents(ctx, "u1")
	b, _ := json.Marshal(waits)
	seen += string(b)
	for i, r := range s.Requests() {
		for _, m := range r.Messages {
			seen += "\n" + m.Content
		}
		_ = i
	}
	h, _ := o.History(ctx, "u1", "c1")
	for _, m := range h {
		seen += "\n" + m.Content
	}
	if strings.Contains(seen, leakySecret) {
		t.Errorf("the Approval's panic text reached the user, the model or the listing:\n%s", seen)
	}
	if !strings.Contains(logs.String(), "access_token=***") || strings.Contains(logs.String(), leakySecret) {
		t.Errorf("the panic is not in the log, masked: %s", logs.String())
	}
}
