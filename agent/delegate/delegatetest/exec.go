package delegatetest

import (
	"context"
	"errors"
	"sync"

	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/budget"
)

// Step scripts the runs of one task (by task id) of a ScriptedExecutor.
type Step struct {
	// Text is the output's text; "" means "done <task id>".
	Text string
	// Status is the output's status; "" means completed.
	Status delegate.ResultStatus
	// Tokens is the output's Usage.Tokens.
	Tokens int
	// Errors is how many runs return an error first; -1: every run.
	Errors int
	// Err is that error; nil means a generic one.
	Err error
	// Gate, when not nil, holds every run of the task until a value is
	// received from it or the run's ctx ends (then the run returns
	// ctx's error).
	Gate chan struct{}
	// FinishAfterStop makes a gated run wait for its ctx to end, then for
	// its Gate, and return its output: a sub-agent finishing its last
	// step after its engine began to stop.
	FinishAfterStop bool
	// Panic makes every run panic, as a buggy executor would.
	Panic bool
}

// TaskRun is one recorded run of a task.
type TaskRun struct {
	TenantID, GraphID, TaskID string
	// Deps are the dependencies' results the run was given.
	Deps map[string]delegate.Result
	// Stored reports whether every dependency's result could be read from
	// the engine when the run started (nil engine: not checked).
	Stored bool
}

// ScriptedExecutor is a delegate.Executor for tests: it runs each task
// by its Step, records the runs and deliveries in order, counts the
// runs under way, and can fail tasks, runs and deliveries. It is safe
// for concurrent use; its zero value completes every task.
type ScriptedExecutor struct {
	// Steps scripts tasks by id; a task not there completes.
	Steps map[string]Step
	// FailDeliveries is how many deliveries return an error first; -1:
	// every one.
	FailDeliveries int
	// Results, when set, is read at each run's start to check that its
	// dependencies' results are stored (Run.Stored).
	Results delegate.Results

	mu         sync.Mutex
	runs       []TaskRun
	errs       map[string]int // errors returned, by tenant/graph/task
	deliveries []delegate.Graph
	failed     int // deliveries failed
	inflight   int
	peak       int
	changed    chan struct{}
}

func (e *ScriptedExecutor) notify() {
	if e.changed != nil {
		close(e.changed)
	}
	e.changed = make(chan struct{})
}

// Changed returns a channel closed at the next run or delivery recorded.
func (e *ScriptedExecutor) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.changed == nil {
		e.changed = make(chan struct{})
	}
	return e.changed
}

// RunTask runs t by its Step.
func (e *ScriptedExecutor) RunTask(ctx context.Context, g *delegate.Graph, t *delegate.Task, deps map[string]delegate.Result) (delegate.Output, error) {
	run := TaskRun{TenantID: g.TenantID, GraphID: g.ID, TaskID: t.ID, Deps: deps}
	if e.Results != nil {
		run.Stored = true
		for _, d := range t.DependsOn {
			if _, err := e.Results.Result(ctx, g.TenantID, delegate.ResultID(g.ID, d)); err != nil {
				run.Stored = false
			}
		}
	}
	step := e.Steps[t.ID]
	id := g.TenantID + "/" + g.ID + "/" + t.ID
	e.mu.Lock()
	e.runs = append(e.runs, run)
	e.inflight++
	e.peak = max(e.peak, e.inflight)
	if e.errs == nil {
		e.errs = map[string]int{}
	}
	fail := step.Errors < 0 || e.errs[id] < step.Errors
	if fail {
		e.errs[id]++
	}
	e.notify()
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.inflight--
		e.notify()
		e.mu.Unlock()
	}()
	if step.Gate != nil && step.FinishAfterStop {
		<-ctx.Done()
		<-step.Gate
	} else if step.Gate != nil {
		select {
		case <-step.Gate:
		case <-ctx.Done():
			return delegate.Output{}, ctx.Err()
		}
	}
	if step.Panic {
		panic("scripted executor panic in task " + t.ID)
	}
	if fail {
		if step.Err != nil {
			return delegate.Output{}, step.Err
		}
		return delegate.Output{}, errors.New("scripted run error")
	}
	text := step.Text
	if text == "" {
		text = "done " + t.ID
	}
	return delegate.Output{Text: text, Status: step.Status, Usage: budget.Consumed{Tokens: step.Tokens}}, nil
}

// Deliver records g's delivery, or fails by FailDeliveries.
func (e *ScriptedExecutor) Deliver(ctx context.Context, g *delegate.Graph) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	defer e.notify()
	if e.FailDeliveries < 0 || e.failed < e.FailDeliveries {
		e.failed++
		return errors.New("scripted delivery error")
	}
	e.deliveries = append(e.deliveries, g.Clone())
	return nil
}

// Runs returns the runs recorded, in the order they started.
func (e *ScriptedExecutor) Runs() []TaskRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]TaskRun(nil), e.runs...)
}

// Deliveries returns the graphs delivered (Deliver returned nil), in
// order.
func (e *ScriptedExecutor) Deliveries() []delegate.Graph {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]delegate.Graph(nil), e.deliveries...)
}

// FailedDeliveries returns how many deliveries returned an error.
func (e *ScriptedExecutor) FailedDeliveries() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

// Peak returns the most runs under way at once so far; InFlight those
// under way now.
func (e *ScriptedExecutor) Peak() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.peak
}

// InFlight returns the runs under way now.
func (e *ScriptedExecutor) InFlight() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inflight
}
