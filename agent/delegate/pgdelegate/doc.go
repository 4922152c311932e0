// Package pgdelegate keeps sub-agents' results and task graphs on
// PostgreSQL and runs the graphs' tasks as River jobs
// (github.com/riverqueue/river), so that a restart or another replica
// finishes what was left and no result or delivery is lost.
//
//	eng, err := pgdelegate.New(db, pgdelegate.Config{Schema: "valet"}) // db: your *pgxpool.Pool; zero fields: the defaults
//	if err := eng.Migrate(ctx); err != nil { … }
//	go eng.Run(ctx, o.TaskExecutor()) // o: the agent.Orchestrator; River works the tasks until ctx ends
//
// An [Engine] is a delegate.Engine: it passes delegatetest's conformance
// suite, its restart and replica checks included.
//
// # Schema and tables
//
// Config.Schema chooses the schema the engine's tables and River's live
// in, as for every PostgreSQL backend of valet: it is passed to River
// (river.Config.Schema and its migrations) and the engine's queries name
// their tables in it, so engines in two schemas of one database keep
// apart on the same pool. The schema must exist before Migrate. ""
// (the default) is the connection's search_path. [Engine.Migrate] runs
// River's migrations and creates valet_delegate_results,
// valet_delegate_graphs, valet_delegate_tasks and valet_delegate_edges
// (a task's dependencies, indexed by the dependency) under an advisory
// lock: run it at start from every process. Times are kept to the
// microsecond, in UTC.
//
// # Tasks as River jobs
//
// Each ready task is one River job of kind [TaskJobKind] on Config.Queue,
// unique by (tenant, graph, task). Submit writes the graph, its tasks and
// edges and inserts the jobs of the tasks without dependencies, in one
// transaction. When a task's run ends, one transaction holding the
// task's row stores its result, marks the task completed, decrements
// the waiting count of its dependants (their rows locked in id order)
// and inserts the jobs of those that became ready (river InsertManyTx),
// adds its usage to the graph's and decrements the graph's count of
// tasks left, and, the count at zero, ends the graph and inserts its
// delivery job ([DeliverJobKind]); and it completes the task's job
// (river.JobCompleteTx).
// So a result is stored before anyone can read of it, and dependants
// start only once it is. A task whose sub-agent failed, or whose run
// returned an error on its last attempt (Config.MaxAttempts, retried
// after Config.RetryDelay doubling), fails in that same transaction, and
// its dependants are blocked, transitively. There is no queue or polling
// loop of valet's own: River's fetching, retries and unique jobs do it.
// Config.Parallel is River's MaxWorkers on the queue: the tasks and
// deliveries one process works at once; replicas add theirs.
//
// A delivery job calls Executor.Deliver and, when it returns nil, marks
// the graph delivered and completes the job in one transaction; after an
// error River tries it again (Config.RetryDelay doubling up to
// MaxRetryDelay, Config.DeliverAttempts times), and past those attempts
// every MaxRetryDelay (snoozed) for as long as the engine runs: a
// delivery is never given up. Delivery is at least
// once: Deliver makes it idempotent by the graph's id.
//
// # Restarts, replicas and crashes
//
// When Run's ctx ends it stops the River client, cancelling the runs
// under way; their jobs are snoozed, not failed, and run again at once on
// the next start, here or on a replica. When Run starts it first queues
// the delivery of every ended graph not yet delivered and a job for every
// ready task of a running graph (River's uniqueness drops those still
// queued), so a restart finishes what was left. Engines on one schema and
// queue share the jobs: River gives each job to one worker, so each task
// runs once.
//
// River has no heartbeats: a job whose process died (a killed process)
// stays running until Config.RescueStuckJobsAfter has passed since it
// started; River's rescuer (every 30 seconds) then makes it available
// again, and it runs again as its next attempt. Config.JobTimeout bounds
// a run on River's side: set it above the longest sub-agent run (its
// timeout, the graph's MaxWall), and RescueStuckJobsAfter above
// JobTimeout (New refuses otherwise). A task may thus run twice after a
// crash; its result is written once, by the run that ends it first.
//
// # Throughput
//
// A task costs more than a plain River job: its job reads the graph and
// the task, marks it running, reads its dependencies' results, and its
// end is a transaction of its own that locks the task's row, its
// dependants' and, at its end, the graph's. BenchmarkGraph1000 runs a
// graph of 1,000 trivial tasks to its delivery against 1,000 plain River
// jobs of a no-op worker, same workers (8) and FetchCooldown (10ms), on 2
// cores shared with PostgreSQL: 10 roots each fanning out to 99 tasks
// took 6.4 s against 1.6 s (4.0×), 10 chains of 100 took 6.5 s against
// 1.5 s (4.3×), about 155 tasks a second. A sub-agent's run takes
// seconds, so this is not what limits a graph of real tasks.
//
// # Cancelling
//
// [Engine.Cancel] (delegate.Canceller) marks the conversation's running
// graphs and their unended tasks cancelled and cancels their task jobs
// with River's JobCancelTx, in one transaction. A queued job never runs;
// for a job under way River cancels its ctx on whichever replica works it
// (it is told by LISTEN/NOTIFY when the transaction commits, or finds it
// at its next poll) — the replica calling Cancel need not run the engine.
// The worker then drops the run's output (the task is already ended, so
// no result is written), River does not retry the job, and Run's requeue
// skips cancelled graphs, so nothing of them runs after a restart; their
// delivery is never queued. A task's run that ended just before the
// Cancel reached its replica keeps its result only if its end committed
// first.
//
// # Retention
//
// A River periodic job ([PruneJobKind]; at start, then every
// Config.Retention or hour, whichever is shorter) calls [Engine.Prune]:
// graphs delivered or cancelled more than Retention ago go, with their tasks, and so
// do the results stored before then whose graph is gone. Undelivered
// graphs stay.
package pgdelegate
