package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A risk policy decides per call from the arguments: the same shell tool
// runs `ls` freely, waits for the user's approval on `rm`, and never runs
// `sudo`. The user's "yes" runs the waiting call once.
func ExampleLoopConfig_riskPolicy() {
	sh := tool.New("shell", "Run a shell command", func(_ context.Context, in struct {
		Cmd string `json:"cmd"`
	}) (string, error) {
		fmt.Println("  ran:", in.Cmd)
		return "ok", nil
	})
	policy := func(_ context.Context, c llm.ToolCall, declared tool.Risk) (tool.Risk, error) {
		var in struct{ Cmd string }
		if err := json.Unmarshal(c.Arguments, &in); err != nil {
			return 0, err // the call is denied
		}
		switch {
		case strings.HasPrefix(in.Cmd, "sudo"):
			return tool.RiskCritical, nil
		case strings.HasPrefix(in.Cmd, "rm "):
			return tool.RiskHigh, nil
		}
		return declared, nil
	}
	model := llmtest.NewScript(
		llmtest.Calls(
			llmtest.Call("shell", `{"cmd":"ls"}`),
			llmtest.Call("shell", `{"cmd":"rm old.log"}`),
			llmtest.Call("shell", `{"cmd":"sudo reboot"}`),
		),
		llmtest.Text("old.log waits for your approval; I may not reboot."),
		llmtest.Text("Removed old.log."),
	)
	o, err := agent.NewOrchestrator(agent.Config{
		LLM: model, Tools: []tool.Tool{sh}, Logger: slog.New(slog.DiscardHandler),
		Loop: agent.LoopConfig{RiskPolicy: policy},
	})
	if err != nil {
		panic(err)
	}
	defer o.Close(context.Background())
	ctx := context.Background()
	fmt.Println("message 1")
	res, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", Text: "Clean up and reboot."})
	if err != nil {
		panic(err)
	}
	for _, c := range res.ToolCalls {
		fmt.Println(" ", c.ArgsSummary, c.ResultStatus)
	}
	req := res.PendingApprovals[0]
	fmt.Println(" ", res.Status, "|", req.AgentName, "|", req.ActionSummary)
	fmt.Println("message 2")
	res, err = o.HandleMessage(ctx, agent.Message{TenantID: "u1", Text: "yes"})
	if err != nil {
		panic(err)
	}
	fmt.Println(" ", res.Status, "|", res.Response)
	// Output:
	// message 1
	//   ran: ls
	//   {"cmd":"ls"} completed
	//   {"cmd":"rm old.log"} waiting_for_approval
	//   {"cmd":"sudo reboot"} denied
	//   waiting_for_approval | tool:shell | Run shell {"cmd":"rm old.log"}
	// message 2
	//   ran: rm old.log
	//   completed | Removed old.log.
}
