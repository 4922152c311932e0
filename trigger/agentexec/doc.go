// Package agentexec is the "orchestrator" executor of package trigger:
// each run of a task becomes one agent.Message handled by an
// agent.Orchestrator. Package trigger does not import package agent; this
// adapter imports both. Register it under trigger.DefaultExecutor:
//
//	exec, err := agentexec.New(orchestrator, agentexec.Config{}) // the zero Config: the defaults
//	engine, err := trigger.New(trigger.Config{
//		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
//	})
//
// # The message
//
// A run's message belongs to the task's tenant and conversation (the
// tenant's default conversation when the task names none: the run is
// saved there, for the user to see, but loads none of its history, so
// that one task's run never reads another's output — or the user's chat
// — outside the blocks described below; a task that should continue from
// its earlier runs names a conversation), has Source
// agent.SourceTrigger and TaskID the task's ID, and its Budget is the
// task's Budget as it is (trigger.Budget and agent.Budget are both
// budget.Limits; a zero field takes the orchestrator's
// LoopConfig.Budget). Its time zone is New's Config.Location,
// else the zone of the task's cron schedule, else the orchestrator's.
//
// Its text is the task's instruction, tagged with what fired it:
//
//	[Scheduled Task] Summarise my unread mail.
//	[Condition Trigger] inbox_unread: Summarise my unread mail.
//	[Event Trigger] message.received: Tell me if this is urgent.
//
// An event trigger names the task's event type (its source when it has no
// type). The event itself — its source, type and data — is untrusted: it
// follows as JSON in an <event_data> block introduced as data, not
// instructions, with every '<' and '>' escaped (\u003c, \u003e) so that
// nothing in it can close the block, and on one line: every line break
// and control character in it (NEL, LS and PS included) is a \u escape.
//
// # Checking a task
//
// The executor is a trigger.TaskChecker: when a task is created
// (trigger.Engine.CreateTask), a task that could never run is refused at
// once with trigger.ErrInvalid instead of failing at its first run — one
// without an instruction or of an unknown trigger kind, and one whose
// Budget the orchestrator cannot run (agent.Orchestrator.CheckBudget: a
// dollar budget on a model with no price in agent.Config.Prices, which
// also wraps agent.ErrNoPrice, or a token budget smaller than the
// smallest model call, which also wraps agent.ErrInvalidBudget).
//
// # The result
//
// The run's result is the orchestrator's answer, and its usage the run's
// Result.Consumed as it is (tokens, cost, wall clock, tool calls;
// agent.Consumed and trigger.Usage are both budget.Consumed). When
// HandleMessage fails, Execute returns its error — the engine records a
// failed attempt and tries again by the task's Retry — with the usage of
// what ran. The run ends with the engine's context: its run timeout (the
// task's Budget.MaxWall, else the engine's RunTimeout) or the engine
// stopping.
//
// A run of a chained task (trigger.RouteChain with PassOutput) gets the
// previous run's output after its instruction, in a
// <previous_task_output> block, its '<' and '>' escaped the same way and
// every line break in it (CR, CR LF, VT, FF, NEL, LS, PS) written as LF,
// so that the block has the same lines for every reader.
//
// # Approvals
//
// A run that raises approvals (an Agent-Tool that asks before it sends an
// email) reports those of its task in ExecResult.Approvals: the engine
// records the run as waiting, tells the task's channel, and a one-time
// task is PENDING_APPROVAL meanwhile. The approvals are the
// orchestrator's, listed by ListPendingApprovals with source "trigger"
// and the task id, and answered through it like any other (a reply, or
// ResolveApproval). [Approvals] is the hook that tells the engine how
// they ended, so that the run ends with what the user was told:
//
//	var link agentexec.Approvals
//	o, _ := agent.NewOrchestrator(agent.Config{…, Hooks: agent.Hooks{Decided: link.Decided}})
//	exec, _ := agentexec.New(o, agentexec.Config{})
//	e, _ := trigger.New(trigger.Config{Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec}})
//	link.Attach(e)
//
// The user hears the outcome once. When they decide in the chat (their
// message to HandleMessage or Stream: agent.Decided.InReply), the reply
// to that message is the answer: the run ends with it as its result, but
// the task's notifier is not sent it again (trigger.Run.ResultShown).
// When the decision comes from elsewhere (ResolveApproval, a UI's
// button), the notifier delivers the result; when the approvals expire
// unanswered, it tells them nothing was done (trigger.NotifyExpired).
//
// A run whose Agent-Tools wait for the user's input, or that the
// orchestrator's ShouldProcess hook refuses, succeeds with the
// orchestrator's answer (the question, or the reason).
//
// # Refusals
//
// A run the orchestrator's SpendGuard refuses, before any model call or,
// with a guard that reserves each call (agent.SpendReserver), before a
// later call (a daily spending limit reached; Usage then holds what it
// consumed), is a refusal, not a failure: Execute
// returns an error wrapping trigger.ErrRefused and the orchestrator's
// (errors.Is agent.ErrSpendRefused; its text names the limit and the
// spend, for operators), and the guard's reason for the user — the
// agent.RefusalError's Reason, the Result's Response, else
// agent.DefaultRefusalReason — as ExecResult.Result. The engine records
// the run as trigger.RunRefused without trying it again or counting it
// toward DEAD: a daily task runs again tomorrow, when the limit has
// reset. The task's channel is told the reason alone, never the error's
// figures (what all tenants spent, the service's limit). A guard that
// fails refuses too (agent.SpendGuard), and is recorded the same way.
package agentexec
