package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/internal/textsafe"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/tool"
)

// Bounds of a delivery's text (see Orchestrator.TaskExecutor).
const (
	deliveryResultBytes = 16 << 10 // of one result's text
	deliveryResults     = 8        // results shown; the others by id only
	deliveryTasks       = 50       // tasks listed
)

// TaskExecutor returns the delegate.Executor that runs background task
// graphs through o: give it to the Run of the engine in
// SubAgentOptions.Engine (go engine.Run(ctx, o.TaskExecutor())). The
// default in-memory engine needs nothing: the orchestrator runs it.
//
// Its RunTask runs a graph's task as a sub-agent at depth 1, as
// spawn_agent would for the coordinator: the task's skill (its prompt,
// exactly its tools, its model; none: the worker prompt and the
// coordinator's tools), its task and context, with each
// [agent_result:ID] reference resolved — a dependency's task id names
// that task's result — and framed as data, on what the graph's Budget
// has left. A model failure or a cancellation is an error (the engine
// runs the task again); a refusal (an unknown skill, a missing result)
// and a sub-agent stopped by its budget or timeout are outputs, failed or
// partial. The task's steps reach the Observer with Step.Path
// ["<graph id>/<task id>"]. Each task is a run for Config.SpendGuard
// (RunInfo Source SourceTrigger, TaskID "graph:" and the graph's id):
// refused, it fails without a model call; what it used is recorded.
//
// Its Deliver hands the graph's end to the coordinator's conversation as
// a new message, the path a triggered run takes (Message.Source
// SourceTrigger, TaskID "graph:" and the graph's id, so the history tells
// it from the user's words): which tasks completed, failed or were
// blocked, with their result ids (a partial one marked so, shown or not)
// and texts framed as data (each cut at 16 KiB, at most 8 shown, 50 tasks
// listed). The coordinator's reaction,
// its Result, goes to SubAgentOptions.OnBackground. An error (the
// conversation's turn not saved, the memory provider or the model
// failing) makes the engine deliver again later. The engine delivers at
// least once: if the process stops after the message was handled and
// before the engine recorded the delivery, a durable engine delivers
// again after a restart. Deliver finds the first delivery in the
// conversation's history (the messages its next message loads) and does
// not make it again — nor calls OnBackground, which may then have missed
// it; a delivery the history no longer holds (the conversation went on
// past MaxHistoryMessages, or was compacted, meanwhile) is made twice,
// its text naming the graph's id so the coordinator can tell. The engine
// does not deliver a graph Forget dropped; a delivery already under way
// when Forget ran may still be made once after it.
func (o *Orchestrator) TaskExecutor() delegate.Executor { return taskExecutor{o} }

// taskExecutor is Orchestrator.TaskExecutor's delegate.Executor.
type taskExecutor struct{ o *Orchestrator }

// errNoSubAgents: the orchestrator offers no sub-agents to run tasks.
var errNoSubAgents = errors.New("agent: SubAgents is not enabled: no task can run")

// RunTask runs task t of graph g (see TaskExecutor).
func (x taskExecutor) RunTask(ctx context.Context, g *delegate.Graph, t *delegate.Task, deps map[string]delegate.Result) (delegate.Output, error) {
	o := x.o
	if o == nil || o.spawn == nil {
		return delegate.Output{Status: delegate.ResultFailed, Text: errNoSubAgents.Error()}, nil
	}
	b, why := graphLeft(g, o.now())
	if why != "" {
		return delegate.Output{Status: delegate.ResultFailed, Text: why}, nil
	}
	r := o.newRun(ctx, Message{
		TenantID: g.TenantID, ConversationID: g.ConversationID, Model: g.Model,
		Source: SourceTrigger, TaskID: graphTaskID(g.ID),
	}, nil)
	// A background task is a run like any other for the SpendGuard:
	// refused, it makes no model call; allowed, what it used is recorded.
	if err := r.checkSpend(); err != nil {
		if ctx.Err() != nil {
			return delegate.Output{}, err
		}
		return delegate.Output{Status: delegate.ResultFailed, Text: "The spending limits refused the task: " + textsafe.Line(r.res.Response)}, nil
	}
	defer r.recordSpend()
	r.loadSources()
	if !b.IsZero() {
		r.meter = &meter{b: b, start: r.start, used: &r.res.Consumed, price: o.price}
	}
	r.graph = &graphTask{deps: deps}
	raw, err := json.Marshal(spawnSkillArgs{Task: t.Task, Context: t.Context, Skill: t.Skill})
	if err != nil {
		return delegate.Output{}, err
	}
	r.spawned = new(spawnTally)
	out := r.spawnCall(ctx, llm.ToolCall{ID: g.ID + "/" + t.ID, Name: SpawnAgentTool, Arguments: raw})
	r.addSpawned()    // what the sub-agent used, for recordSpend
	if !r.graph.ran { // refused before a sub-agent started
		return delegate.Output{Status: delegate.ResultFailed, Text: out.result.Content}, nil
	}
	return r.graph.out, r.graph.err
}

// graphLeft is what g's Budget has left at now (MaxWall counts from
// CreatedAt), or why nothing is.
func graphLeft(g *delegate.Graph, now time.Time) (Budget, string) {
	if why := delegate.Spent(g.Budget, g.Consumed); why != "" {
		return Budget{}, why
	}
	l, c := g.Budget, g.Consumed
	b := l
	if l.MaxTokens > 0 {
		b.MaxTokens = l.MaxTokens - c.Tokens
	}
	if l.MaxCostUSD > 0 {
		b.MaxCostUSD = l.MaxCostUSD - c.CostUSD
	}
	if l.MaxToolCalls > 0 {
		b.MaxToolCalls = l.MaxToolCalls - c.ToolCalls
	}
	if l.MaxWall > 0 {
		if b.MaxWall = l.MaxWall - now.Sub(g.CreatedAt); b.MaxWall <= 0 {
			return Budget{}, "the graph's time budget is spent"
		}
	}
	return b, ""
}

// Deliver tells g's conversation that g ended (see TaskExecutor).
func (x taskExecutor) Deliver(ctx context.Context, g *delegate.Graph) error {
	o := x.o
	if o == nil || o.spawn == nil {
		return errNoSubAgents
	}
	if done, err := o.delivered(ctx, g); err != nil || done {
		return err
	}
	text, err := o.deliveryText(ctx, g)
	if err != nil {
		return err
	}
	res, err := o.HandleMessage(ctx, Message{
		TenantID: g.TenantID, ConversationID: g.ConversationID, Text: text, Model: g.Model,
		Source: SourceTrigger, TaskID: graphTaskID(g.ID),
	})
	if err != nil {
		return fmt.Errorf("agent: delivering graph %s: %w", g.ID, err)
	}
	if f := o.spawn.opts.OnBackground; f != nil {
		f(ctx, res)
	}
	return nil
}

// deliveryOpening begins the text of graph id's delivery.
func deliveryOpening(id string) string {
	return "[Background Tasks] The background work you started (graph " + id + ") has ended"
}

// delivered reports whether the conversation's history (what its next
// message loads) already holds g's delivery: a triggered message that
// opens with deliveryOpening. The graph's id is random, so no other
// message opens so.
func (o *Orchestrator) delivered(ctx context.Context, g *delegate.Graph) (bool, error) {
	h, err := o.History(ctx, g.TenantID, g.ConversationID)
	if err != nil {
		return false, err
	}
	open := deliveryOpening(g.ID)
	for i := range h {
		if isTriggered(&h[i]) && strings.HasPrefix(h[i].Content, open) {
			return true, nil
		}
	}
	return false, nil
}

// deliveryText is the message a graph's end becomes.
func (o *Orchestrator) deliveryText(ctx context.Context, g *delegate.Graph) (string, error) {
	var done, failed, blocked int
	for i := range g.Tasks {
		switch g.Tasks[i].Status {
		case delegate.TaskCompleted:
			done++
		case delegate.TaskFailed:
			failed++
		case delegate.TaskBlocked:
			blocked++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d of %d tasks completed", deliveryOpening(g.ID), done, len(g.Tasks))
	if failed > 0 {
		fmt.Fprintf(&b, ", %d failed", failed)
	}
	if blocked > 0 {
		fmt.Fprintf(&b, ", %d blocked by a failed task", blocked)
	}
	b.WriteString(".\n")
	var shown []delegate.Result
	for i := range g.Tasks {
		t := &g.Tasks[i]
		if i == deliveryTasks {
			fmt.Fprintf(&b, "- and %d more tasks\n", len(g.Tasks)-i)
			break
		}
		fmt.Fprintf(&b, "- %s", t.ID)
		if t.Skill != "" {
			fmt.Fprintf(&b, " (skill %s)", t.Skill)
		}
		fmt.Fprintf(&b, ": %s", t.Status)
		if t.Error != "" {
			var e strings.Builder
			neutralise(&e, textsafe.Line(t.Error))
			fmt.Fprintf(&b, ": %s", e.String())
		}
		if t.ResultID != "" {
			// Each listed result is read, so that one cut short (a
			// sub-agent stopped by its budget) is marked partial also
			// when its text is not shown.
			res, err := o.spawn.del.engine.Result(ctx, g.TenantID, t.ResultID)
			if err != nil {
				return "", fmt.Errorf("agent: reading result %s of graph %s: %w", t.ResultID, g.ID, err)
			}
			fmt.Fprintf(&b, "; result [agent_result:%s]", t.ResultID)
			if res.Status == delegate.ResultPartial {
				b.WriteString(" (partial: the sub-agent was stopped before it finished)")
			}
			if len(shown) < deliveryResults {
				shown = append(shown, res)
			} else {
				b.WriteString(" (not shown here)")
			}
		}
		b.WriteString("\n")
	}
	if len(shown) > 0 {
		b.WriteString(strings.TrimPrefix(refsIntro, "\n\n"))
		for i := range shown {
			b.WriteString("\n")
			b.WriteString(frameResult(shown[i].ID, &shown[i], deliveryResultBytes))
		}
		b.WriteString("\n")
	}
	b.WriteString("\nTell the user what came of it. To hand a result to another sub-agent, put its [agent_result:…] reference in that spawn's context.")
	return b.String(), nil
}

// graphParkRefused is the outcome of a graph's task whose sub-agent
// stopped to wait for the user's approval of an Agent-Tool's action: a
// background task has no coordinator run to wait in, so nothing is parked
// and the action is not taken; the task fails, saying what it wanted, so
// the coordinator can run it in the foreground, where the user is asked.
func (r *run) graphParkRefused(p *subPark) callOutcome {
	text := fmt.Sprintf("The task needs the user's approval for %s (%s), and a background task cannot wait for the user: "+
		"nothing was done. Run it in the foreground (spawn_agent without background) so the user is asked.",
		p.agent.name, strings.TrimRight(textsafe.Line(p.req.ActionSummary), "."))
	g := r.graph
	g.ran = true
	g.out = delegate.Output{Text: text, Status: delegate.ResultFailed}
	return callOutcome{result: tool.Result{Content: text, IsError: true}, status: resultError}
}
