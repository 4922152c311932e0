package agent_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// Approvals inside a sub-agent: the specialist calls an Agent-Tool that
// needs approval, so it is parked and the coordinator's run waits with
// the request the user sees (Waiting.Path names the sub-agent). The
// user's decision runs the action once, the specialist goes on where it
// stopped, and its answer reaches the coordinator.
func ExampleOrchestrator_ResolveApproval_subAgent() {
	const worker = "You pay bills."
	done := 0
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "transfer", "Send money to someone", Transfer{&done}); err != nil {
		panic(err)
	}
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		last := req.Messages[len(req.Messages)-1]
		switch {
		case len(req.Tools) == 0: // phrasing the request for the user
			return llmtest.Text("Please confirm: send €40 to Ana?")
		case req.Messages[0].Content == worker && last.Role == llm.RoleTool: // the specialist reads the transfer's result
			return llmtest.Text("Paid: " + last.Content)
		case req.Messages[0].Content == worker:
			return llmtest.Calls(llmtest.Call("transfer", `{"to":"Ana","amount":40}`))
		case last.Role == llm.RoleTool && strings.HasPrefix(last.ToolCallID, "resume_"): // the specialist's answer
			return llmtest.Text("Done. " + strings.SplitN(last.Content, "\n", 2)[0])
		case last.Role == llm.RoleUser:
			return llmtest.Calls(llm.ToolCall{ID: "bills", Name: agent.SpawnAgentTool, Arguments: []byte(`{"task":"Pay Ana back 40 EUR."}`)})
		}
		return llmtest.Text("Waiting for you.")
	})
	o, err := agent.NewOrchestrator(agent.Config{
		LLM: model, Agents: reg, Logger: slog.New(slog.DiscardHandler),
		SubAgents: agent.SubAgentOptions{Enabled: true, WorkerPrompt: worker},
	})
	if err != nil {
		panic(err)
	}
	defer o.Close(context.Background())
	ctx := context.Background()
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", Text: "Pay Ana back."})
	if err != nil {
		panic(err)
	}
	req := res.PendingApprovals[0]
	fmt.Println(res.Status, "|", req.ActionSummary, "| asked by", res.Waiting[0].Path)
	res, err = o.ResolveApproval(ctx, "u1", req.ID, approval.Decision{Action: approval.Approve, Fingerprint: req.Fingerprint})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Status, "|", res.Response)
	fmt.Println("transfers made:", done)
	// Output:
	// waiting_for_approval | Send €40 to Ana | asked by [bills]
	// completed | Done. Paid: Sent €40 to Ana.
	// transfers made: 1
}
