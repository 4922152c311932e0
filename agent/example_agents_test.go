package agent_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
)

type TransferIn struct {
	To     string `json:"to" jsonschema:"description=Payee name"`
	Amount int    `json:"amount" jsonschema:"description=Amount in euros,minimum=1"`
}

// Transfer moves money; it always asks the user first.
type Transfer struct{ done *int }

func (t Transfer) Run(ctx context.Context, in TransferIn) (agent.Reply, error) {
	*t.done++
	return agent.Reply{Text: fmt.Sprintf("Sent €%d to %s.", in.Amount, in.To)}, nil
}

func (Transfer) Approval(in TransferIn) *approval.Request {
	return &approval.Request{ActionSummary: fmt.Sprintf("Send €%d to %s", in.Amount, in.To)}
}

func ExampleRegister() {
	done := 0
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "transfer", "Send money to someone", Transfer{&done}); err != nil {
		panic(err)
	}
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("transfer", `{"to":"Ana"}`)),        // amount missing
		llmtest.Text("How much should I send to Ana?"),                 // phrased question
		llmtest.Calls(llmtest.Call("provide_fields", `{"amount":40}`)), // the reply's fields
		llmtest.Text("Please confirm: send €40 to Ana?"),               // phrased approval
		llmtest.Text("Done — €40 is on its way to Ana."),               // after the "yes"
	)
	o, _ := agent.NewOrchestrator(agent.Config{LLM: model, Agents: reg, Logger: slog.New(slog.DiscardHandler)})
	ctx := context.Background()
	for _, text := range []string{"pay Ana back", "40 euros", "yes"} {
		res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", Text: text})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-14s → %-18s %s\n", text, res.Status, res.Response)
	}
	fmt.Println("transfers made:", done)
	// Output:
	// pay Ana back   → waiting_for_input  How much should I send to Ana?
	// 40 euros       → waiting_for_approval Please confirm: send €40 to Ana?
	// yes            → completed          Done — €40 is on its way to Ana.
	// transfers made: 1
}
