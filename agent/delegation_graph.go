package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/tool"
)

// spawnTaskArgs is one task of spawn_agent's tasks argument.
type spawnTaskArgs struct {
	ID        string   `json:"id" jsonschema:"description=The task's id: lowercase letters and digits and - and _; unique among the tasks"`
	Skill     string   `json:"skill,omitempty" jsonschema:"description=The skill whose specialist runs the task; leave it out for a general worker"`
	Task      string   `json:"task" jsonschema:"description=What the sub-agent is to do and answer with"`
	Context   string   `json:"context,omitempty" jsonschema:"description=What it needs to know; [agent_result:<id of a task it depends on>] puts that task's result there"`
	DependsOn []string `json:"depends_on,omitempty" jsonschema:"description=The ids of the tasks that must complete before this one starts"`
}

// singleTaskID is the id of the one task of a spawn with background true.
const singleTaskID = "task"

// graphTaskID is the Message.TaskID of the runs of graph id: its tasks'
// sub-agents and the delivery of its end.
func graphTaskID(id string) string { return "graph:" + id }

// spawnBackground starts background work: the spawn's task (background
// true) or its tasks, as a delegate.Graph submitted to the engine, with
// budget_share of what the run's budget has left, reserved: counted as
// committed for the run, so the graphs a run starts cannot together get
// more than it had. It returns at once with
// the graph's id and its tasks' result ids; the graph's end comes to the
// conversation as a new message (delegation_exec.go). Only the
// coordinator starts background work. A graph that cannot run (a cycle,
// an unknown dependency or skill, a missing result) is an error result
// and nothing is stored.
func (r *run) spawnBackground(ctx context.Context, in spawnSkillArgs) callOutcome {
	o := r.o
	fail := func(format string, a ...any) callOutcome {
		return callOutcome{result: tool.Result{Content: fmt.Sprintf(format, a...), IsError: true}}
	}
	if r.sub != nil {
		return fail("spawn_agent: background and tasks are for the coordinator only: a sub-agent cannot start background work; nothing was started")
	}
	if in.BudgetShare < 0 || in.BudgetShare > 1 || in.BudgetShare != in.BudgetShare {
		return fail("spawn_agent: budget_share must be between 0 and 1")
	}
	var specs []delegate.TaskSpec
	switch {
	case in.Tasks != nil && (strings.TrimSpace(in.Task) != "" || in.Context != "" || in.Skill != ""):
		return fail("spawn_agent: give either task (with context and skill) or tasks, not both; nothing was started")
	case in.Tasks != nil:
		if len(in.Tasks) == 0 {
			return fail("spawn_agent: tasks is empty; nothing was started")
		}
		specs = make([]delegate.TaskSpec, len(in.Tasks))
		for i, t := range in.Tasks {
			specs[i] = delegate.TaskSpec{ID: t.ID, Skill: t.Skill, Task: t.Task, Context: t.Context, DependsOn: t.DependsOn}
		}
	case strings.TrimSpace(in.Task) == "":
		return fail("spawn_agent: task is required")
	default:
		specs = []delegate.TaskSpec{{ID: singleTaskID, Skill: in.Skill, Task: in.Task, Context: in.Context}}
	}
	g, err := delegate.NewGraph(r.msg.TenantID, r.msg.ConversationID, specs)
	if err != nil {
		return fail("spawn_agent: the tasks cannot run: %s; nothing was started", quotedError(err))
	}
	for i := range g.Tasks {
		t := &g.Tasks[i]
		if t.Skill != "" {
			if _, _, refusal := r.childScope(1, t.Skill); refusal != "" {
				return fail("task %s: %s", t.ID, refusal)
			}
		}
		ids := delegate.Refs(t.Task + "\n" + t.Context)
		if len(ids) > MaxResultRefs {
			return fail("task %s: spawn_agent: %d result references; at most %d may be given; nothing was started", t.ID, len(ids), MaxResultRefs)
		}
		for _, id := range ids {
			if g.Task(id) != nil {
				continue // a dependency's result (Check saw to that)
			}
			if _, refusal := r.lookupRef(ctx, id); refusal != "" {
				return fail("task %s: %s", t.ID, refusal)
			}
		}
	}
	b, ok := r.reserveBudget(in.BudgetShare)
	if !ok {
		return fail("spawn_agent: this request's budget is spent; nothing was started")
	}
	g.Budget, g.Model = b, r.msg.Model
	if !o.startEngine() {
		r.releaseBudget(b)
		return fail("spawn_agent: background work cannot start: the orchestrator is closed; nothing was started")
	}
	if err := o.spawn.del.engine.Submit(ctx, g); err != nil {
		r.releaseBudget(b)
		if errors.Is(err, delegate.ErrInvalid) {
			return fail("spawn_agent: the tasks cannot run: %s; nothing was started", quotedError(err))
		}
		r.log().WarnContext(ctx, "agent: a task graph could not be submitted", "err", maskText(err.Error()))
		return fail("spawn_agent: background work could not be started just now; nothing was started")
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "Started in the background as graph %s: ", g.ID)
	for i := range g.Tasks {
		if i > 0 {
			sb.WriteString(", ")
		}
		if i == 20 {
			fmt.Fprintf(&sb, "and %d more", len(g.Tasks)-i)
			break
		}
		t := &g.Tasks[i]
		fmt.Fprintf(&sb, "task %s (its result will be [agent_result:%s])", t.ID, delegate.ResultID(g.ID, t.ID))
	}
	sb.WriteString(". Do not wait for it: when it ends, its results come to this conversation as a new message. Tell the user it is under way.")
	return callOutcome{result: tool.Result{Content: sb.String()}}
}

// quotedError is a delegate error's text for the model: one line, bounded
// (it may quote the model's own task ids).
func quotedError(err error) string {
	return delegate.ErrorLine(err)
}
