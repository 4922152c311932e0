// Package delegate keeps sub-agents' results and runs task graphs: the
// durable side of delegation. A coordinator agent hands work to
// specialists (agent's spawn_agent); what a specialist returns is stored
// as a [Result] before anyone is told of it, so no result is lost between
// a specialist finishing and its reader, and a later spawn's context can
// point at it with a reference, [agent_result:ID] ([Refs] finds them),
// instead of carrying the text.
//
// # Task graphs
//
// A [Graph] is a set of tasks ([TaskSpec]) with depends_on edges, run in
// the background for a coordinator's conversation. [Graph.Check] (and
// [NewGraph]) refuses, wrapping [ErrInvalid], what cannot run: bad or
// duplicate ids, an unknown dependency, a cycle ([ErrCycle], naming a
// task on it), an [agent_result:ID] reference to a task of the graph the
// task does not depend on, more than [MaxTasks] tasks, texts over
// [MaxTaskBytes].
//
// An [Engine] stores graphs and works them through an [Executor]
// (agent.Orchestrator.TaskExecutor returns one): every task whose dependencies
// completed starts, up to a parallel limit; its output is stored as the
// result [ResultID](graph, task) before the task is marked completed and
// before any dependant starts, which gets the results of its
// dependencies. A task whose sub-agent failed, or whose run returned an
// error on every attempt, fails, and its dependants, transitively, are
// blocked with an Error naming it; the others go on. A task does not
// start once the graph's Budget is spent (it fails, saying so); a graph
// whose Budget caps tokens, cost or tool calls ([OneAtATime]) runs one
// task at a time, so it spends at most its budget and the one model call
// that crossed it. When
// nothing more can run the graph ends, completed or failed, and the
// engine calls Executor.Deliver, again after an error with a growing
// delay, until it returns nil (Graph.Delivered): the graph's end reaches
// the coordinator's conversation as a new message. Delivery is at least
// once; Deliver makes it idempotent by the graph's id.
//
// Everything is per tenant: another tenant's graph or result is not
// found ([ErrNotFound]). Engine.Forget drops a conversation's results
// and graphs (the user asked for it to go): their tasks stop starting and
// their ends are not delivered.
//
// # Cancelling a conversation's work
//
// An engine that is a [Canceller] (both engines here are) stops a
// conversation's running graphs on request (agent.Orchestrator.Cancel):
// Cancel ends each as [GraphCancelled] at once, its tasks not yet ended
// as [TaskCancelled]; a run under way has its ctx cancelled — in
// whichever process runs it — and its output dropped; no task of it runs
// again after a retry or a restart; and its end is not delivered. Graphs
// already ended are left to their delivery. A cancelled graph stays
// readable (Engine.Graph) until Retention drops it, as a delivered one
// does. Tenant and conversation ids are up to
// [MaxOwnerIDLen] bytes, as in every valet package; a graph's texts are
// [MaxGraphBytes] in all at most.
//
// # Engines
//
// [Memory] ([NewMemory]) keeps graphs and results in the process: they
// end with it. Ended and delivered (or cancelled) graphs and the results are dropped
// after MemoryConfig.Retention, so memory stays bounded by what is
// submitted in that time. Package pgdelegate keeps them in PostgreSQL and
// runs the tasks as River jobs, so a restart or another replica finishes
// what was left. Package delegatetest is the conformance suite both
// pass.
//
// # Untrusted text
//
// A result's Text is what a sub-agent wrote after reading tool output:
// it is data, stored byte for byte, and must be framed as such wherever a
// model or a user sees it. Ids and names are checked to be one line; a
// task's Error is put on one line (internal/textsafe).
package delegate
