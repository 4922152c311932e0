// Package budget defines what bounds a run and what a run used, for
// every package that runs one: [Limits] (the caps: tokens, dollars, wall
// clock, tool calls; zero is no cap) and [Consumed] (the same four
// measures of what a run spent). It imports only the standard library,
// so the agent and trigger packages share one type without one importing
// the other.
//
// The other packages name these types for their own use, as aliases:
//
//	agent.Budget   = budget.Limits   // Message.Budget, LoopConfig.Budget
//	trigger.Budget = budget.Limits   // Task.Budget
//	agent.Consumed = budget.Consumed // Result.Consumed, SpendGuard.Record
//	trigger.Usage  = budget.Consumed // Run.Consumed, ExecResult.Usage
//
// so a task's budget is handed to the orchestrator as it is, and the
// orchestrator's Result.Consumed is the task's run usage as it is.
//
// A model call's token counts are llm.Usage (input and output apart);
// Consumed.Tokens sums llm.Usage.Total over every call of a run.
//
// # Checking
//
// [Limits.Check] and [Consumed.Check] refuse a negative cap or measure
// and a dollar figure that is NaN, infinite or negative, with an error
// wrapping [ErrInvalid]. agent.ErrInvalidBudget is ErrInvalid itself;
// trigger wraps the error in trigger.ErrInvalid too when it checks a task
// or a run, so
//
//	err := engine.CreateTask(ctx, task) // task.Budget.MaxTokens == -1
//	errors.Is(err, trigger.ErrInvalid)  // true
//	errors.Is(err, budget.ErrInvalid)   // true
//
// # Stored form
//
// Both types carry JSON names (max_tokens, max_cost_usd, max_wall,
// max_tool_calls; tokens, cost_usd, wall, tool_calls), zero fields
// omitted, durations in nanoseconds: the form trigger's stores have
// always written, so tasks and runs stored before this package existed
// decode unchanged.
package budget
