package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/valetkit/valet/agent/delegate"
)

// Delegation's durable side (SubAgentOptions.Engine): every sub-agent's
// result is stored in the engine's Results before anyone reads it, a
// spawn's context may point at a stored result with [agent_result:ID]
// (delegation_refs.go), and background work runs as a delegate.Graph
// (delegation_graph.go) whose end is delivered to the coordinator's
// conversation as a new message (delegation_exec.go).

// resultWriteTimeout bounds storing a sub-agent's result, which is done
// also when the spawn's ctx ended (the result must not be lost).
const resultWriteTimeout = 10 * time.Second

// delegation is the orchestrator's engine and, for the default in-memory
// one, its Run's lifecycle.
type delegation struct {
	engine delegate.Engine
	own    *delegate.Memory // the default engine, run by the orchestrator; nil for the host's

	mu      sync.Mutex
	running bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

// initDelegation sets the engine: SubAgentOptions.Engine, or a new
// in-memory one on the orchestrator's clock, started on first use.
func (o *Orchestrator) initDelegation() error {
	if o.spawn == nil {
		return nil
	}
	d := &o.spawn.del
	if e := o.spawn.opts.Engine; e != nil {
		d.engine = e
		return nil
	}
	m, err := delegate.NewMemory(delegate.MemoryConfig{Clock: o.clock})
	if err != nil {
		return fmt.Errorf("the default delegation engine: %w", err)
	}
	d.engine, d.own = m, m
	return nil
}

// startEngine runs the default engine if it is not running yet; it
// reports false once Close stopped it. A host's engine is the host's to
// run: true.
func (o *Orchestrator) startEngine() bool {
	d := &o.spawn.del
	if d.own == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	if d.running {
		return true
	}
	ctx, cancel := context.WithCancel(context.Background())
	d.running, d.cancel, d.done = true, cancel, make(chan struct{})
	go func() {
		defer close(d.done)
		if err := d.own.Run(ctx, o.TaskExecutor()); err != nil {
			o.log.Error("agent: the delegation engine stopped", "err", maskText(err.Error()))
		}
	}()
	return true
}

// stopEngine stops the default engine's Run and waits for what it runs,
// or for ctx to end.
func (o *Orchestrator) stopEngine(ctx context.Context) error {
	if o.spawn == nil || o.spawn.del.own == nil {
		return nil
	}
	d := &o.spawn.del
	d.mu.Lock()
	d.closed = true
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// graphTask is what makes a run the parent of a graph's task
// (delegation_exec.go): the results of the task's dependencies, by task
// id, and the output of the sub-agent spawnCall ran, taken instead of
// stored (the engine stores it).
type graphTask struct {
	deps map[string]delegate.Result
	ran  bool
	out  delegate.Output
	err  error
}

// keepResult stores the result of the sub-agent a spawn ran or resumed
// (res, partial and err as subResult got them, used what it consumed in
// all; ctx is the spawn's, with its timeout) in the engine's Results before the tool result out
// goes to the coordinator, and tells it the result's id as
// [agent_result:ID]. When the write fails, out still carries the text and
// says that it has no id. For a graph's task the output is captured for
// the engine, which stores it.
func (r *run) keepResult(ctx context.Context, sub *subRun, res *Result, used Consumed, partial string, err error, out *callOutcome) {
	o := r.o
	text, status := res.Response, delegate.ResultCompleted
	switch {
	case err == nil && res.BudgetExceeded:
		status = delegate.ResultPartial
	case err == nil:
	case errors.Is(err, ErrBudgetExceeded):
		text, status = partial, delegate.ResultPartial
	case ctx.Err() == context.DeadlineExceeded && r.ctx.Err() == nil && r.toolCtx.Err() == nil:
		text, status = partial, delegate.ResultPartial
	default:
		text, status = partial, delegate.ResultFailed
	}
	if c := r.graph; c != nil {
		c.ran = true
		c.out = delegate.Output{Text: text, Status: status, Usage: used}
		if status == delegate.ResultFailed {
			// The run itself failed (the model, a cancellation): the
			// engine may run the task again.
			c.err = err
		}
		return
	}
	rec := delegate.Result{
		ID: delegate.NewID(), TenantID: r.msg.TenantID, ConversationID: r.msg.ConversationID,
		Skill: sub.skill, Status: status, Usage: used,
	}
	rec.Text = delegate.Output{Text: text, Status: status}.Clean().Text
	if rec.Text != text && status == delegate.ResultCompleted {
		rec.Status = delegate.ResultPartial // cut at MaxResultBytes
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resultWriteTimeout)
	defer cancel()
	if werr := o.spawn.del.engine.PutResult(wctx, rec); werr != nil {
		r.log().WarnContext(ctx, "agent: a sub-agent's result could not be stored", "err", maskText(werr.Error()))
		out.result.Content += "\n[this result could not be stored, so it has no [agent_result:…] reference: pass its text where it is needed]"
		return
	}
	out.result.Content += "\n[stored as [agent_result:" + rec.ID + "]: to hand this result to another sub-agent, put that reference in its context instead of the text]"
}
