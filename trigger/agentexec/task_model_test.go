package agentexec_test

import (
	"context"
	"errors"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/trigger"
	"github.com/valetkit/valet/trigger/agentexec"
)

// A task names its model; the orchestrator's router says which client
// runs it, and a name no client answers is refused when the task is
// created.
func TestTaskModelIsRoutedAndCheckedAtCreation(t *testing.T) {
	def := llmtest.NewScript(llmtest.Text("from the default"))
	fast := llmtest.NewScript(llmtest.Text("from fast"))
	o := newOrch(t, def, nil, agent.Config{Models: agent.ModelMap{"fast": fast}})
	exec := newExec(t, o, agentexec.Config{})
	tc, ok := exec.(trigger.TaskChecker)
	if !ok {
		t.Fatal("the executor is not a TaskChecker")
	}

	bad := scheduleTask("t1", "Summarise the news")
	bad.Model = "fsat"
	if err := tc.CheckTask(context.Background(), bad); !errors.Is(err, trigger.ErrInvalid) || !errors.Is(err, agent.ErrUnknownModel) {
		t.Fatalf("CheckTask = %v, want ErrInvalid and agent.ErrUnknownModel", err)
	}

	task := scheduleTask("t2", "Summarise the news")
	task.Model = "fast"
	if err := tc.CheckTask(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	if _, err := execute(t, exec, trigger.ExecRun{Task: task}); err != nil {
		t.Fatal(err)
	}
	if fast.Calls() == 0 || def.Calls() != 0 {
		t.Fatalf("fast called %d times, default %d; want the task's model only", fast.Calls(), def.Calls())
	}
}
