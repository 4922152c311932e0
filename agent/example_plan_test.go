package agent_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/tool"
)

// A plan: the model keeps the steps of a longer task with update_plan;
// the tool result is the plan as a checklist, Result.Plan the plan when
// the run ends, and the conversation's next run starts from it.
func ExamplePlanOptions() {
	model := llmtest.NewScript(
		llmtest.Calls(llmtest.Call(agent.UpdatePlanTool, `{"approach":"Cheapest first","focus":"2","steps":[`+
			`{"id":"1","description":"Find flights","status":"done"},`+
			`{"id":"2","description":"Book the hotel","status":"in_progress"},`+
			`{"id":"3","description":"Rent a car","status":"pending"}]}`)),
		llmtest.Text("Flights found; booking the hotel next."),
		llmtest.Text("Still on the hotel."),
	)
	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Plan: agent.PlanOptions{Enabled: true}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close(context.Background())
	m := agent.Message{TenantID: "u1", ConversationID: "trip", Text: "Plan my trip to Lyon."}
	res, err := o.HandleMessage(context.Background(), m)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Plan.Markdown())
	m.Text = "Where are we?"
	res, err = o.HandleMessage(context.Background(), m)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Response, "Focus:", res.Plan.Focus)
	// Output:
	// Current plan (1 of 3 steps done or skipped):
	// Approach: Cheapest first
	// Focus: 2
	// - [x] 1: Find flights (done)
	// - [~] 2: Book the hotel (in_progress)
	// - [ ] 3: Rent a car (pending)
	// Still on the hotel. Focus: 2
}

// A doom loop: a model that keeps making the same call gets a note, then
// a firmer one, then the run is stopped with ErrDoomLoop and the answer of
// one last call without tools.
func ExampleLoopConfig_doomLoop() {
	lookup := tool.New("lookup", "Looks a word up", func(_ context.Context, in struct {
		Word string `json:"word"`
	}) (string, error) {
		return "no entry for " + in.Word, nil
	})
	replies := make([]llmtest.Reply, 0, 5)
	for range 4 {
		replies = append(replies, llmtest.Calls(llmtest.Call("lookup", `{"word":"zyzzyva"}`)))
	}
	replies = append(replies, llmtest.Text("The dictionary has no entry for zyzzyva."))
	o, err := agent.NewOrchestrator(agent.Config{
		LLM:   llmtest.NewScript(replies...),
		Tools: []tool.Tool{lookup},
		// Stop at the second time two identical calls are found.
		Loop: agent.LoopConfig{DoomRepeats: 2, DoomMaxInterventions: 2},
		Observer: agent.ObserverFunc(func(_ context.Context, s agent.Step) {
			if s.Kind == agent.StepDoomLoop {
				fmt.Println("intervention", s.Count)
			}
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer o.Close(context.Background())
	res, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", Text: "What is a zyzzyva?"})
	fmt.Println(errors.Is(err, agent.ErrDoomLoop), res.Status)
	fmt.Println(res.Response)
	// Output:
	// intervention 1
	// intervention 2
	// true error
	// The dictionary has no entry for zyzzyva.
}
