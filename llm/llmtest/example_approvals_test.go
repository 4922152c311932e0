package llmtest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm/llmtest"
)

type PayIn struct {
	To     string `json:"to" jsonschema:"description=Payee name"`
	Amount int    `json:"amount" jsonschema:"description=Amount in euros,minimum=1"`
}

// Pay sends money; it always asks the user first, who may change the amount.
type Pay struct{ paid *[]string }

func (p Pay) Run(ctx context.Context, in PayIn) (agent.Reply, error) {
	*p.paid = append(*p.paid, fmt.Sprintf("€%d to %s", in.Amount, in.To))
	return agent.Reply{Text: "Paid."}, nil
}

func (Pay) Approval(in PayIn) *approval.Request {
	return &approval.Request{ActionSummary: fmt.Sprintf("Pay €%d to %s", in.Amount, in.To), AllowModification: true}
}

// A bot whose Agent-Tool needs approval, tested by chat: the script answers
// the orchestrator's approval call by position, without digging approval
// ids out of the request.
func ExampleDecide() {
	var paid []string
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "pay", "Pay someone", Pay{&paid}); err != nil {
		panic(err)
	}
	model := llmtest.NewScript(
		// "pay Ana 40, Bob 25 and Cy 10": three payments wait for approval.
		llmtest.Calls(
			llmtest.Call("pay", `{"to":"Ana","amount":40}`),
			llmtest.Call("pay", `{"to":"Bob","amount":25}`),
			llmtest.Call("pay", `{"to":"Cy","amount":10}`),
		),
		llmtest.Text("Shall I make these three payments?"),
		// The user's answer, read by the approval call.
		llmtest.Decide(llmtest.Approve(0), llmtest.Cancel(1).Because("already paid"), llmtest.Edit(2, `{"amount":15}`)),
		// The loop goes on with the results.
		llmtest.Text("Paid Ana €40 and Cy €15; Bob's payment is cancelled."),
	)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:    model,
		Agents: reg,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", Text: "pay Ana 40, Bob 25 and Cy 10"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Response)
	for i, a := range res.PendingApprovals {
		fmt.Println(i, a.ActionSummary)
	}

	res, err = o.HandleMessage(ctx, agent.Message{TenantID: "u1", Text: "yes for Ana, not Bob, and only 15 for Cy"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, res.Response)
	fmt.Println("paid:", strings.Join(paid, ", "))
	fmt.Println("replies left:", model.Remaining(), "errors:", model.Err())
	// Output:
	// waiting_for_approval Shall I make these three payments?
	// 0 Pay €40 to Ana
	// 1 Pay €25 to Bob
	// 2 Pay €10 to Cy
	// completed Paid Ana €40 and Cy €15; Bob's payment is cancelled.
	// paid: €40 to Ana, €15 to Cy
	// replies left: 0 errors: <nil>
}

// The fake API mounted under a path prefix of a server the test runs
// itself, e.g. beside the frontend under test.
func ExampleNewHandler() {
	fake := llmtest.NewHandler(llmtest.NewScript(llmtest.Text("Hello from /fake.")))
	mux := http.NewServeMux()
	mux.Handle("/fake/", http.StripPrefix("/fake", fake))
	ts := httptest.NewServer(mux) // or http.ListenAndServe on any address
	defer ts.Close()

	// Clients take ts.URL + "/fake/v1" as their base URL.
	fake.Inject(llmtest.Unavailable(503))
	for range 2 {
		resp, err := ts.Client().Post(ts.URL+"/fake/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.Contains(string(body), "Hello from /fake."))
	}
	fmt.Println(fake.Requests()[1].Path)
	// Output:
	// 503 false
	// 200 true
	// /v1/chat/completions
}
