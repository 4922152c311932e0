package agent_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// The user corrects a running task: the loop sees the correction once the
// tool under way returns, before its next model call.
func ExampleOrchestrator_Inject() {
	ctx := context.Background()
	started, release := make(chan struct{}), make(chan struct{})
	measure := tool.New("measure_room", "Measure the room", func(ctx context.Context, in struct{}) (string, error) {
		close(started)
		<-release // a long measurement
		return "4.2 m by 3.1 m", nil
	})
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call("measure_room", `{}`)),
		llmtest.Text("The room is 4.2 m by 3.1 m, about 13 m²."),
	)
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Tools: []tool.Tool{measure}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan *agent.Result)
	go func() {
		res, _ := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: "How big is the room?"})
		done <- res
	}()
	<-started
	if err := o.Inject(ctx, "u1", "c1", "In metric units, please."); err != nil {
		fmt.Println(err)
	}
	close(release)
	res := <-done
	fmt.Println(res.Status, "-", res.Response)

	req := model.Requests()[1] // the loop's second model call
	last := req.Messages[len(req.Messages)-1]
	fmt.Printf("%s: %s\n", last.Role, last.Content)

	// Nothing runs now.
	fmt.Println(errors.Is(o.Cancel(ctx, "u1", "c1"), agent.ErrNotRunning))
	// Output:
	// completed - The room is 4.2 m by 3.1 m, about 13 m².
	// user: [The user sent this while you were working on the request; take it into account from now on:]
	// In metric units, please.
	// true
}

// With RouteWhileRunning, the user's "stop" sent while the loop runs
// cancels it instead of waiting its turn.
func ExampleLoopConfig_routeWhileRunning() {
	ctx := context.Background()
	started := make(chan struct{})
	slow := tool.New("slow_search", "Search slowly", func(ctx context.Context, in struct{}) (string, error) {
		close(started)
		<-ctx.Done() // until cancelled
		return "", ctx.Err()
	})
	// A bare "stop" takes no classification call (llm.PurposeRoute); any
	// other text would, answered here with llmtest.Text("correction"), ...
	model := llmtest.NewScript(llmtest.Calls(llmtest.Call("slow_search", `{}`)))
	o, err := agent.NewOrchestrator(agent.Config{
		LLM: model, Tools: []tool.Tool{slow}, Logger: slog.New(slog.DiscardHandler),
		Loop: agent.LoopConfig{RouteWhileRunning: true},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan *agent.Result)
	go func() {
		res, _ := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: "Find every flight to Oslo"})
		done <- res
	}()
	<-started
	stop, _ := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Text: "Stop!"})
	fmt.Println("the stop message:", stop.Status, stop.Steered)
	fmt.Println("the running loop:", (<-done).Status)
	// Output:
	// the stop message: injected cancel
	// the running loop: cancelled
}
