package delegate_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/valetkit/valet/agent/delegate"
)

// writer is an Executor whose sub-agents are stand-ins: research returns
// notes, write quotes the notes it was given.
type writer struct{ done chan delegate.Graph }

func (w writer) RunTask(ctx context.Context, g *delegate.Graph, t *delegate.Task, deps map[string]delegate.Result) (delegate.Output, error) {
	if t.ID == "research" {
		return delegate.Output{Text: "Hotel Arts: sea view, 240 EUR"}, nil
	}
	// The context's [agent_result:research] is resolved from deps.
	text := strings.ReplaceAll(t.Context, "[agent_result:research]", deps["research"].Text)
	return delegate.Output{Text: "Draft: " + text}, nil
}

func (w writer) Deliver(ctx context.Context, g *delegate.Graph) error {
	w.done <- g.Clone()
	return nil
}

func Example() {
	engine, err := delegate.NewMemory(delegate.MemoryConfig{})
	if err != nil {
		panic(err)
	}
	g, err := delegate.NewGraph("tenant-1", "conversation-1", []delegate.TaskSpec{
		{ID: "research", Skill: "research", Task: "Find a hotel in Barcelona"},
		{ID: "write", Skill: "writer", Task: "Write the booking email",
			Context: "Notes: [agent_result:research]", DependsOn: []string{"research"}},
	})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	exec := writer{done: make(chan delegate.Graph, 1)}
	ran := make(chan error, 1)
	go func() { ran <- engine.Run(ctx, exec) }()
	if err := engine.Submit(ctx, g); err != nil {
		panic(err)
	}
	ended := <-exec.done
	stop()
	<-ran

	fmt.Println("graph:", ended.Status)
	for _, t := range ended.Tasks {
		r, _ := engine.Result(context.Background(), "tenant-1", t.ResultID)
		fmt.Printf("%s: %s: %s\n", t.ID, t.Status, r.Text)
	}
	// Output:
	// graph: completed
	// research: completed: Hotel Arts: sea view, 240 EUR
	// write: completed: Draft: Notes: Hotel Arts: sea view, 240 EUR
}
