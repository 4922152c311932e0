package trigger

import (
	"context"
	"errors"
	"fmt"
)

// TaskChecker is an Executor that can tell, when a task is created,
// whether it could ever run it: a task whose budget its model cannot
// price, say. CreateTask calls CheckTask with a copy of the task, once
// the task itself is valid and before it is stored; an error refuses the
// task, wrapped in ErrInvalid (an error that ends because ctx ended is
// returned as it is). trigger/agentexec's executor implements it.
// CheckTask must not keep the task or block for long.
type TaskChecker interface {
	CheckTask(ctx context.Context, t *Task) error
}

// checkTask asks t's executor about t when the executor is a TaskChecker.
func (e *Engine) checkTask(ctx context.Context, t *Task) (err error) {
	tc, ok := e.executors[t.ExecutorName()].(TaskChecker)
	if !ok {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("trigger: executor %q panicked checking task %q: %v", t.ExecutorName(), t.ID, p)
		}
	}()
	if err = tc.CheckTask(ctx, t.Clone()); err == nil {
		return nil
	}
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return err
	}
	if errors.Is(err, ErrInvalid) {
		return err
	}
	return fmt.Errorf("%w: task %q: executor %q refuses it: %w", ErrInvalid, t.ID, t.ExecutorName(), err)
}
