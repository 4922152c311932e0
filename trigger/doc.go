// Package trigger is for the tasks an assistant runs on its own
// initiative: a [Task] and its [Trigger] (a [Schedule], events, or a
// [Condition]), the [Run]s of its history, the [Store] that keeps both
// with its in-memory implementation [MemoryStore], the [EventBus] that
// carries [Event]s with its in-memory [MemoryBus], the [Clock] a
// scheduler reads, and the [Engine] that runs tasks through the
// [Executor]s registered by name. trigger/rivertrigger keeps tasks on
// PostgreSQL and runs them through River across replicas;
// trigger/redisbus is an EventBus on Redis Streams; trigger/agentexec is
// the executor that hands a task to the assistant.
//
// [New] takes a [Config] whose zero fields mean the documented defaults
// (an in-memory store and bus, the system clock):
//
//	exec, err := agentexec.New(orchestrator, agentexec.Config{})
//	engine, err := trigger.New(trigger.Config{
//		Executors: map[string]trigger.Executor{trigger.DefaultExecutor: exec},
//	})
//	err = engine.CreateTask(ctx, task) // task.Executor "": DefaultExecutor
//	go engine.Run(ctx)                 // the scheduler, until ctx ends
//
// # Tasks
//
// A Task belongs to a tenant. Its Trigger is one of three kinds: a
// schedule (a Schedule and a MissedPolicy), events (a Source, a Type and
// a Filter of dotted paths into the event's data, each to equal a value)
// or a condition (the name of a check and how often to poll it). Its
// Executor (default [DefaultExecutor], "orchestrator") carries out its
// Action; its Output names where results go. Its Status is one of
// ACTIVE, PAUSED, DISABLED, COMPLETED, PENDING_APPROVAL, EXPIRED and
// DEAD; only ACTIVE tasks are due. Priority (0–9, higher first) orders
// tasks due at the same time; Retry and Budget bound a run's attempts
// and spending. Budget is budget.Limits, and a run's Usage
// budget.Consumed: the types the agent package calls Budget and
// Consumed, shared through the budget package so that trigger does not
// import agent. [Task.Check] validates a task; its errors wrap
// [ErrInvalid] (and budget.ErrInvalid for a budget it refuses). An Executor that is also a [TaskChecker] is asked about a
// task when [Engine.CreateTask] creates it, and its refusal is
// ErrInvalid: a task that could never run fails then, not at its first
// run (trigger/agentexec refuses a dollar budget its model cannot price).
// Tenant, task and conversation ids are at most [MaxIDLen]
// (255) bytes of UTF-8 without NUL, the limit of every valet package
// (memory, agent, pool, credentials): the Engine refuses longer ones
// where they enter (CreateTask, Get, RunNow, Publish…) with ErrInvalid.
//
// # Stores
//
// A [Store] keeps tasks and their run histories. Every method that reads
// or writes one task takes its tenant id, and a task of another tenant
// is [ErrNotFound]. Updates are optimistic: [Store.Update] succeeds only
// at the stored Revision and otherwise fails with [ErrConflict]; read the
// task again and retry. [Store.Due] returns the ACTIVE tasks of every
// tenant whose NextRun has come, earliest first, then by Priority.
// A run is identified by [RunID] (task id and due time), the same on
// every replica and every attempt; a run id that would be longer than
// MaxIDLen is shortened with a hash.
//
// [MemoryStore] keeps everything in process memory, copies what it is
// given and what it returns, and keeps the newest [DefaultMaxRuns] runs
// per task unless told otherwise. trigger/triggertest.RunStore is the
// conformance suite of a Store.
//
// # Schedules
//
// A Schedule is one of three kinds, a plain value to store with its task:
//
//	trigger.Schedule{Cron: "0 9 * * MON-FRI", Zone: "Europe/Paris"}
//	trigger.Schedule{Every: 15 * time.Minute, Start: created}
//	trigger.Schedule{At: time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)}
//
// Check validates one (errors wrap [ErrInvalid]); Next(after) returns its
// first time strictly after after, and false when there is none.
//
// Cron is the standard 5-field syntax — minute (0-59), hour (0-23), day
// of month (1-31), month (1-12 or JAN-DEC), day of week (0-6 or SUN-SAT,
// Sunday 0; 7 is refused) — with "*", "?", lists "1,15", ranges "1-5" and
// steps "*/10", "0-30/5", "5/15", as robfig/cron/v3's parser reads them.
// Descriptors such as "@daily" and "@every 1h" are refused (use Every),
// and so is a "TZ=" prefix (use Zone). When day of month or day of week
// is "*", "?" or "*/1", a day matches when both fields match; when both are
// restricted, when either does ("0 0 13 * FRI": every 13th and every
// Friday), as in robfig/cron and Vixie cron. An expression that matches
// no date ("0 0 30 2 *") fails Check; "0 9 29 2 *" runs on leap days.
//
// Zone is an IANA time zone name; its tz data comes from the system, or
// from the program if it imports time/tzdata. Default: UTC. "Local" is
// refused: replicas on machines set to other zones would disagree.
//
// Every runs at Start, Start+Every, Start+2×Every…, at least a second
// apart ([MinEvery]). A zero Start anchors the times at the Unix epoch,
// so that every replica computes the same ones: Every: time.Hour runs on
// the hour, UTC. Daylight-saving changes do not concern it: it counts
// elapsed time.
//
// At runs once; Next returns it while after is earlier.
//
// # Daylight saving
//
// A cron schedule names wall-clock times in its zone. valet computes the
// instants itself (robfig/cron only parses), by one rule: a wall-clock
// time fires at the first instant the zone's clock reads it or later.
// So:
//
//   - A time that does not exist, because the clocks go forward over it,
//     fires once at the first instant after the gap: "30 2 * * *" in
//     Europe/Paris fires at 03:00 CEST on 29 March 2026. Several times in
//     one gap ("*/15 2 * * *") make one run.
//   - A time that occurs twice, because the clocks go back over it, fires
//     once, at its first occurrence: "30 2 * * *" in Europe/Paris fires at
//     02:30 CEST on 25 October 2026, not again at 02:30 CET. A schedule
//     that fires every few minutes pauses through the repeated hour; use
//     Every for a steady rhythm.
//
// # Missed runs
//
// When nothing was running — the process, or every replica, was down —
// schedule times pass without a run. [Schedule.Due] tells a scheduler
// what to do about them when it wakes, by the task's MissedPolicy:
// [CatchUpOnce] (the default) runs once for all of them, [Skip] runs none.
// A time handled less than a grace after it ([DefaultGrace], a minute)
// is on time, not missed. Either way the schedule carries on from now,
// so a daily task down for a week runs at most once when it comes back.
// A Dispatcher's run is judged the same way when it is delivered: on
// River, a job a grace or more late under Skip runs nothing, and its
// task moves on (a one-time task ends EXPIRED); a later attempt of a run
// that started on time is no missed time and runs.
//
// # Engine
//
// [New] makes an [Engine] from a [Config]: a Store (default a new
// MemoryStore), a Clock (default clock.System), the executors by name,
// how many runs execute at once (MaxConcurrent, default
// [DefaultMaxConcurrent]), the Grace of [Schedule.Due] and the timeout of
// a run without Budget.MaxWall ([DefaultRunTimeout]), and a Logger for
// what it cannot return (failed runs, notifiers, stores). A Store and a
// Bus that report their deployment ([Namespaced]: rivertrigger's
// database and schema, redisbus's Namespace) must report the same one, or
// New refuses them with ErrInvalid. Namespaces of two deployments may
// still collide (databases of one name on two servers sharing a Redis),
// so [Engine.Run], before it starts, has a Store that identifies its data
// ([InstanceIdentifier]: rivertrigger's instance id, made by Migrate)
// claim its namespace on a Bus that takes claims ([NamespaceClaimer]:
// redisbus records the owner beside its stream): the first data to claim
// owns the bus, and Run on other data returns the refusal (ErrInvalid)
// and runs nothing; one database reached by several host names is one
// owner. A Store or a Bus without the interface claims nothing (the
// in-memory ones). A nil Logger
// means slog.Default(), here and in every valet package (MemoryBus,
// rivertrigger, redisbus, redispool, agent). Every method takes
// the tenant id; a task of another tenant is [ErrNotFound].
// [Engine.CreateTask] refuses an executor that is not registered
// (ErrInvalid) and sets NextRun to the schedule's first time from now.
// [Engine.Pause] and [Engine.Resume] stop and restart a task; Resume
// applies the task's MissedPolicy to the times that passed meanwhile.
// [Engine.RunNow] runs a task once, outside its schedule, in the caller's
// goroutine; [Engine.Retry] revives a DEAD task.
//
// # Events
//
// An [Event] (ID, TenantID, Source, Type, Data) reaches the engine
// through its bus: [Engine.Publish], or any publisher of the same bus.
// [Engine.Run] subscribes to it and fires each ACTIVE event task of the
// event's tenant, never another's, whose trigger the event matches
// ([Trigger.Matches]: source and type where set, and each dotted path of
// the filter equal to the filter's value; a missing path never matches).
// A run's id is [EventRunID] of the task and the event, so an event the
// bus delivers again (delivery is at least once) fires each task once:
// in memory while the run is in the history, on River while River keeps
// the job. The executor gets the event in ExecRun.Event; its data is
// untrusted. An event run takes the task's attempts; its last failure
// makes the task DEAD.
//
// # Conditions
//
// A condition task names a [Condition] of Config.Conditions and polls it
// every Trigger.Every, from its creation on. It runs when the check turns
// from false to true ([Task.ConditionMet] keeps the last answer; a check
// that holds at the first poll fires then), never again while it stays
// true; a check that fails or panics changes nothing. A run's later
// attempts do not poll again.
//
// # Results
//
// A run's result is kept in its history and goes along the task's
// [Route]: [RouteNotify] (the default with an Output channel) to the
// [Notifier] of Config.Notifiers for Output.Channel, [RouteSilent] (the
// default without one) nowhere else, [RouteMemory] into Config.Memory as
// an item with the task id as its provenance and memory.OriginTrigger as
// its origin (a task's result, not a fact the user stated), [RouteChain] to a run of
// the tenant's task Route.Next, at once, given the output when
// Route.PassOutput is set ([ExecRun.Previous]; chains stop at
// [MaxChainDepth]). A task that becomes DEAD tells its channel
// ([NotifyFailure]); so does a refused run ([NotifyRefused]). A notifier that fails is tried three times, a
// second then two apart; then the failure is logged and kept in
// [Run.RouteError], and the run's status and result stand. Delivery
// follows the run's record: a process that dies between the two loses
// the notification, not the result. With a Store that is a
// [NotifyDispatcher] (trigger/rivertrigger) every notice about a run
// ([RunNotice]: its end, by an attempt, RunNow or a settlement of its
// approvals; the approvals it asks for; their expiry) and a chained run
// are queued with the record, in its transaction, and are not lost: the
// store delivers the notice at least once, by any replica, through
// [Engine.HandleNotification], which drops a request for approvals whose
// run no longer waits. Every
// notification carries an IdempotencyKey ([NotificationKey] of the run
// and the kind), the same on each delivery of it. CreateTask refuses a
// route the engine cannot deliver.
//
// # Approvals
//
// An executor may end a run with actions waiting for the user's
// confirmation (ExecResult.Approvals: the assistant drafted an email).
// The run is then [RunWaiting]; the task's channel is told
// ([NotifyApproval]); a one-time task is PENDING_APPROVAL, while a
// recurring one keeps firing. [Engine.ApprovalSettled] — called by the
// assistant's hook, trigger/agentexec.Approvals, not by polling — records
// how each approval ended; when all have, the run succeeds with what the
// user was told, delivered along the route, and a PENDING_APPROVAL task
// is COMPLETED. The answer reaches the user once: when it was the reply
// to the user's own chat message ([Settled].ResultShown, kept as
// [Run].ResultShown), the route does not notify it again. Approvals that
// expire unanswered, which a sweeper in Run finds every [ApprovalSweep]
// (the assistant's pool notices expiry only when touched), make the run
// [RunExpired] and the task ACTIVE again, and the channel is told that
// nothing was done ([NotifyExpired]). The
// sweeper knows the runs that went waiting in its own process; after a
// restart an expired approval is settled when the user answers it. A
// Store that is an [ExpiryDispatcher] (trigger/rivertrigger) replaces the
// sweeper: the expiry is queued with the waiting run's record and
// [Engine.HandleExpiry] is called at its time on whichever replica is
// dispatching then, restarts or not. On a [RunSwapper] (rivertrigger)
// a settlement is a compare and set on the run: replicas settling one
// run at once write it once, and its outcome is delivered once. On a
// [RunSettler] (rivertrigger, MemoryStore) the settlement that ends a run
// moves its task out of PENDING_APPROVAL in the same step, so a process
// that dies between them leaves no task stuck there. An
// approval settled before its run is recorded waiting is kept in a
// [SettlementKeeper] store (rivertrigger) for whichever replica records
// the run, else in the memory of the engine that heard it — only while a
// run of the task is in flight: one heard for a task with no run running
// (a stale click, a guessed approval ID) is dropped and logged, never
// kept to approve a later run.
//
// # Refusals
//
// An executor may refuse a run before it does anything, for a reason
// that would not change if the run were tried again at once — a spending
// limit reached (trigger/agentexec maps the assistant's SpendGuard
// refusal to this), a policy — by returning an error wrapping
// [ErrRefused], with the reason for the user, text to show as it is, in
// ExecResult.Result. A refusal is an outcome, not a failure, alike in
// memory and on a Dispatcher (trigger/rivertrigger completes the job):
// the run is [RunRefused], its Result the user's reason and its Error the
// executor's error, for operators; it is not tried again and does not
// count toward DEAD. The task moves on as after a success: LastRun is
// set, a recurring task is due at its next time (a daily task whose
// limit is reached today runs tomorrow), a condition task runs on its
// next false→true edge, not at every poll while the condition holds, and
// an event task on its next event. A one-time task, with no time left,
// ends EXPIRED: its work was never done. [Engine.RunNow] returns the run
// refused. The task's channel, when it has one, is told once
// ([NotifyRefused]), with the user's reason alone, never Run.Error;
// nothing goes into memory or to a chained task.
//
// # Lifecycle
//
// Config.Observer hears of each task's steps (scheduled, started,
// completed, failed, dead, refused, budget warning, budget exceeded,
// waiting, expired), in order,
// from a goroutine of the engine's, never holding a run up: a slow
// observer loses steps past [MaxObserverBacklog].
//
// # Dispatchers
//
// A Store that is also a [Dispatcher] delivers due runs itself: Run hands
// it the engine ([Engine.HandleDue], [Engine.HandleLost]) instead of
// polling Due, and the Dispatcher's Create and Update queue the run at a
// task's NextRun. trigger/rivertrigger is one.
//
// [Engine.Run] is the scheduler. It sleeps until the earliest NextRun
// (or until a task is created, resumed or retried, or a run finishes),
// takes the due tasks from [Store.Due] and executes each in a goroutine
// of its own, at most MaxConcurrent at a time, one run per task at a
// time. A run is recorded in the history as running, then succeeded or
// failed; its id is [RunID] of the task and the due time, the same on
// every attempt. After a success LastRun is set and NextRun is the
// schedule's next time by the MissedPolicy; a one-time task becomes
// COMPLETED (EXPIRED when Skip passed over its time). After a failure the
// run is tried again after its Retry.Backoff, doubling with each attempt
// (at most [MaxBackoff]), until Retry.MaxAttempts; the last failure makes
// the run dead, with its error, and the task DEAD. A panicking executor
// is a failed attempt; a refused one (ErrRefused, see Refusals) is not. Task updates are optimistic and read the task
// again on ErrConflict. When ctx ends, Run cancels the runs under way,
// waits for them, and records them as failed ("interrupted") without
// moving the task on, so that the next Run retries them.
//
// # Clocks
//
// The clock comes from Config.Clock (a clock.Clock; nil: clock.System),
// and MemoryStore's and MemoryBus's from their Clock fields; tests pass
// one clock/clocktest.Clock to everything they wire, which moves only when
// the test advances it, so a test runs a month of schedules without
// sleeping. [Clock], [Timer] and [SystemClock] are aliases of
// clock.Clock, clock.Timer and clock.System.
package trigger
