// Package rivertrigger keeps trigger tasks on PostgreSQL and runs them
// through River (github.com/riverqueue/river), so that any number of
// engine replicas share them durably.
//
//	store, err := rivertrigger.New(db, rivertrigger.Config{Schema: "valet"}) // db: your *pgxpool.Pool; zero fields: the defaults
//	if err := store.Migrate(ctx); err != nil { … }
//	bus, err := redisbus.New(rdb, redisbus.Config{Namespace: store.Namespace()})
//	engine, err := trigger.New(trigger.Config{Store: store, Bus: bus, Executors: executors})
//	go engine.Run(ctx) // River works the runs until ctx ends
//
// New takes the pool the host already has and a [Config] whose zero value
// means the documented defaults.
//
// The clock of CreatedAt and UpdatedAt comes from Config.Clock (nil:
// clock.System); tests pass one clock/clocktest.Clock to everything they
// wire. River times its jobs by the database's clock, not this one; a
// test runs them on its clock with [Store.WorkDue] (see Testing the River
// path).
//
// # Schema
//
// Config.Schema chooses the schema valet's tables and River's live in,
// as it does for every PostgreSQL backend of valet (memory/pgmemory,
// credentials/pgstore): it is passed to River (river.Config.Schema, and
// its migrations), and valet's queries name their tables in it, so
// stores in two schemas of one database keep their tasks, runs and River
// jobs apart on the same pool, whatever its search_path. The schema must
// exist before Migrate. "" (the default) is the connection's search_path.
//
// # Namespace
//
// A Store names the deployment its tasks belong to ([Store.Namespace],
// trigger.Namespaced): Config.Namespace, by default "database/schema",
// the pool's database and Config.Schema, or when that is "" the first
// schema of the search_path its connection string sets, as a parameter or
// in its options ("-c search_path=…"; "public" when none). An event bus
// must belong to the same one: trigger.New refuses a Store and a Bus whose
// namespaces differ (ErrInvalid), so an engine on staging's tables cannot
// read production's events. A redisbus.Bus given the store's namespace
// names its stream from it and its key prefix,
// "valet:database/schema:events" by default. The server is not part of
// it: set Config.Namespace when deployments sharing a Redis use databases
// of the same name on different servers, when the schema is chosen
// otherwise (a role's default search_path, SET in AfterConnect), or to
// name the deployment yourself.
//
// A mistake there is caught when the engine starts: [Store.Migrate] makes
// an instance id for the data in its schema, once ([Store.InstanceID],
// trigger.InstanceIdentifier), the same by whatever host name, proxy or
// address the pool reaches the server, and trigger.Engine.Run claims the
// bus's namespace for it (trigger.NamespaceClaimer). The first database to
// run an engine on a redisbus stream owns it; an engine on another
// database whose namespace is the same returns ErrInvalid from Run, saying
// to set rivertrigger.Config.Namespace and redisbus.Config.Namespace per
// environment, and takes no event. A dump restored elsewhere keeps its
// id; new data for a deployment (its schema recreated) needs the stream's
// owner key deleted (redisbus.Bus.OwnerKey).
//
// # Tables
//
// Task definitions and run histories live in valet's tables,
// valet_trigger_tasks and valet_trigger_runs, beside River's (river_job
// and the others), approvals settled before their run was recorded in
// valet_trigger_settled, and the instance id in valet_trigger_instance
// (one row), all in Config.Schema. [Store.Migrate] creates them, River's
// migrations included, under an advisory lock: run it at start from every
// process (an engine on a schema it has not migrated fails to start, the
// instance id missing). Times are kept to the microsecond, in UTC.
//
// # Runs as River jobs
//
// A [Store] is a [trigger.Dispatcher]. Each due run is one River job of
// kind [JobKind], scheduled at the task's NextRun and unique by (tenant,
// task, due time): Create and Update queue it in the transaction that
// writes the task, so it is queued once however many replicas write, and
// when a run succeeds its record, the task's next time and the next run's
// job are written, and its job completed, in one transaction. A run is
// thus recorded complete once.
//
// Execution is at least once. River has no heartbeats: a job whose worker
// died (a killed process) stays running until RescueStuckJobsAfter has
// passed, then River's rescuer (every 30 seconds) makes it available
// again and another replica runs it, as its next attempt under the same
// run id ([trigger.RunID]): executors use ExecRun.RunID to make side
// effects idempotent. Config.JobTimeout bounds a run on River's side:
// set it above the longest run (the engine's RunTimeout, every task's
// Budget.MaxWall; a task whose MaxWall is not below it is refused), and
// RescueStuckJobsAfter above JobTimeout (New refuses otherwise).
//
// Attempts are River's: a failed attempt returns its error to River,
// which tries again after the task's Retry.Backoff doubling with each
// attempt ([trigger.Retry.Delay]), up to Retry.MaxAttempts. On the last
// attempt valet records the run dead and the task DEAD before River
// discards the job, so discarded jobs are the dead letters, and
// [trigger.Engine.Retry] revives the task. A reconciler catches jobs River
// discards without valet's code running (a job rescued on its last
// attempt) and makes their tasks DEAD too. A refused run
// ([trigger.ErrRefused], a spend limit reached) is no failure: valet
// records it ([trigger.RunRefused]), moves the task on and completes the
// job with the record, so River does not try it again. A run found stale
// when its job comes up (the task deleted, paused, or due at another
// time) is cancelled; an attempt cut short because the engine is stopping is
// snoozed, so it does not count as an attempt.
//
// # Priorities and concurrency
//
// River has four priority levels; [Priority] maps a task's 0–9 onto
// them. Config.MaxWorkers is River's cap on the runs one process works at
// once; the engine's MaxConcurrent applies within it. Both default to
// trigger.DefaultMaxConcurrent, 100: a triggered run mostly waits on a
// model (seconds of a call, little CPU), so the bound is how many may
// wait at once, not the cores. Each waiting run holds a goroutine and
// what its executor keeps (an agent's conversation, typically tens of
// kilobytes, at most about its context window) and, for its short
// queries before and after the executor, a connection of the pool: give
// the pool 10–20 (pgxpool's default is the number of CPUs, at least 4).
// Lower both when runs burn CPU or a model's rate limit is the bound.
// The engine's one-run-per-task rule is per process; across replicas, a
// task has one job at a time (the next is queued when a run ends).
//
// # Tenants share the workers
//
// River works a queue's available jobs in one order (priority, then due
// time), so one tenant's 5,000 runs due at 08:00 would take every worker
// until they all ran, and another tenant's run due a moment later would
// wait behind them (25 s on 2 replicas of 100). Config.TenantWindow
// bounds how many runs of one tenant are ready at once (running, or
// available to a worker), across replicas: when a run starts and its
// tenant has more, the tenant's available runs past the window are held
// back (scheduled, marked valet_held in the job's metadata), and each
// run of the tenant that ends lets as many in as the window has room
// for, behind the runs already waiting, and wakes the workers (one
// replica holds a tenant back at a time, under an advisory lock).
// Another tenant's run thus waits behind at most a window of a busy
// tenant's, and a tenant alone still uses every worker when the window is
// at least the replicas' workers together (the default, 2 × MaxWorkers,
// covers two replicas). The state is River's table, so it holds across
// replicas and restarts; a held run whose letting-in was lost with its
// process (or to a failing database) comes back by itself after 2
// minutes. Holding back uses no attempt, and the window applies to the
// runs Dispatch works, not to WorkDue. Its check is part of the
// statement a scheduled run starts with (an event's or a chained run's
// own query), and a busy tenant's run costs one statement more as it
// starts (holding back) and one as it ends (letting in); a run made
// available before its time is neither counted nor held until its time.
// Migrate adds two partial indexes on river_job for it.
//
// # Firing lag and throughput
//
// River's leader moves scheduled jobs to available every 5 seconds,
// looking 5 seconds ahead, in one statement of up to 10,000 jobs. valet
// does not leave its runs to it: every dispatching Store makes its
// queue's runs due within the next 15 seconds available itself, every
// second, 1,000 at a time (short statements that pass over rows another
// replica holds), keeping their due time, which River's workers wait
// for; when a run's time comes, the Store that made it available wakes
// the workers (River's insert notification), so they fetch it at once
// rather than at their next FetchPollInterval. Runs held back by the
// tenant window, retries and the approvals' expiries are still River's
// scheduler's. So under a light load a run starts within tens of
// milliseconds of its due time (see BenchmarkLightLoadLag in the README),
// and a burst of runs due at once is not one long statement, which on a
// busy database could reach River's 30-second timeout and hold the whole
// burst back until its next pass.
//
// What a run reads and writes as it starts and ends is a few statements:
// its task, recent runs and tenant window in one; its record in one; and
// its end (the task's next time, the record, the job's completion, the
// next run's job) in one transaction, its first statement locking,
// checking and writing the task, the record and the job. With a one-off
// task, about 5 statements per run (BenchmarkMorningBurst's queries/run).
//
// Under load, one engine fetches at most MaxWorkers jobs per
// FetchCooldown (100 ms): with the defaults up to 1,000 runs a second
// per replica, more than PostgreSQL on a small machine records. Runs
// that wait on a model are bound by the workers instead: a burst of
// 10,000 runs of 1 s on 2 replicas ends after ceil(10,000 / 200) s,
// 50 s, at best (see the README's Performance section for the measured
// figures, and BenchmarkMorningBurst). Runs that take no time ran about
// 460 a second with 8 workers at a 10 ms cooldown on 2 cores shared with
// PostgreSQL (BenchmarkRunsPerSecond).
//
// # Chained runs
//
// When a run succeeds and its task's route chains to another task
// (trigger.RouteChain) that is ACTIVE, the next task's run is queued in
// the transaction that records the run, as the River job the engine's
// delivery queues (unique by the run it follows): a process that dies
// between the record and the delivery loses no chained run, and the
// delivery finds it queued. A chain past trigger.MaxChainDepth, or to a
// task that is not ACTIVE, is left to the delivery, which records why on
// the run. A run that succeeds when its approvals are settled has its
// chained run queued the same way, in the transaction of the settlement
// ([Store.SettleRun]).
//
// # Notices
//
// A Store is a trigger.NotifyDispatcher. Every notice about a run
// (trigger.RunNotice) is queued as a River job of kind [NotifyJobKind]
// in the transaction that records what it tells, unique by its
// IdempotencyKey (trigger.NotificationKey of the run id and the notice's
// kind):
//
//   - the end of an attempt (a result, the failure that made its task
//     DEAD, the reason of a refusal) and the approvals a run waits for
//     (trigger.NotifyApproval), in the Finish that records the run;
//   - a run of trigger.Engine.RunNow that ended, in the Finish that
//     records it with the task's LastRun, and a run whose task was
//     rescheduled while it ran, in a Finish with the task as it is;
//   - the end of a waiting run, its approvals settled (its result) or
//     expired (trigger.NotifyExpired), in the [Store.SettleRun] (or
//     [Store.SwapRun]) that records it.
//
// Whichever replica works the job hands it to the engine's
// trigger.Engine.HandleNotification, which calls the channel's Notifier
// once per attempt; a request for approvals whose run no longer waits
// (answered, or expired, meanwhile) is dropped there. Delivery is at
// least once: a Notifier may see a notice again (a replica killed
// mid-delivery, after a River rescue), with the same IdempotencyKey,
// which it keeps to show each once. A failed attempt is tried again after
// Config.NotifyBackoff, doubling, up to Config.NotifyAttempts; the last
// one's failure is logged and kept on the run (Run.RouteError), the run's
// status and result standing. Notices go through a River queue of their
// own (Config.NotifyQueue, NotifyWorkers at once), so a slow or failing
// Notifier holds no run's worker, and each notice is a job of its own, so
// one failing holds no other. Under [Store.WorkDue] nothing is queued:
// the engine sends the notice as it ends the run, as with a
// trigger.MemoryStore. A dead run recorded alone because its task was
// rescheduled while it ran (the task is not DEAD) is still told by the
// engine after the record.
//
// A user who answers an approval on another replica while its run is
// being recorded (the settlement kept, see below) may still be sent the
// request, when its job is worked before the settlement is applied.
//
// # What is durable
//
// Written in the transaction that records a run's end or its wait for
// approvals (Finish, SettleRun), so a process that dies right after the
// record loses none of them: the run's record, the task's next time and
// its job, the completion of the run's job, the run a chained route
// queues, the run's notice, the expiry of a waiting run's approvals, and,
// when a settlement ends a waiting run, its task's move from
// PENDING_APPROVAL to COMPLETED (or ACTIVE, with its next run queued,
// when the approvals expired) ([Store.SettleRun]). An event is
// acknowledged on the bus only once its run's job is queued. What follows
// the record in a step of its own, and is lost with the process in
// between: the Observer's lifecycle steps, a RouteMemory write, and the
// notices named above as the engine's.
//
// # Approvals of triggered runs
//
// A Store is a trigger.ExpiryDispatcher and a trigger.RunSettler. A run
// recorded waiting for approvals that expire has, in the same
// transaction, a River job of kind [ExpiryJobKind] queued at the first
// expiry (unique by run and time); whichever replica works it calls the
// engine's HandleExpiry, which settles what expired by then and ends the
// run when nothing is left, so an approval nobody answers expires on
// time across restarts of every replica. Dispatch works these jobs;
// WorkDue does not (they are timed by the database's clock). Settling an approval replaces
// the run's record only while it is the one the settlement read
// ([Store.SwapRun], a compare and set; [Store.SettleRun] when it ends the
// run, with its task's move, in one transaction): of two replicas
// settling one run at once, one writes and delivers it, the other writes
// nothing and reads it settled. A
// Store is also a trigger.SettlementKeeper: an approval settled before its
// run is recorded waiting (the user answered while the run finished) is
// kept in valet_trigger_settled, at most 1,024 per task, and the replica
// that records the run takes and applies it, whichever replica heard it.
// The engine keeps one only while a run of the task is in flight: a
// settlement for a task with no run running is dropped.
//
// # Leader loss
//
// One replica at a time is River's leader, and only the leader moves
// retries, runs held back by the tenant window and approvals' expiries
// from scheduled to available; a scheduled run's first attempt is made
// available by every dispatching replica (see Firing lag and throughput),
// so it does not wait for a leader. When the leader process is killed
// (SIGKILL, a crash, a lost machine: it does not resign), those others
// wait until another replica is elected: the dead leader's term (15 s,
// renewed every 5 s) runs out 10–15 s after the kill, the other replicas
// bid every 5–6 s, the new leader's maintenance starts within a second and
// makes the due runs available at once, and a worker fetches them at once
// or within FetchPollInterval. So a retry or a held run due while the
// leader is gone starts at most about 22 s plus FetchPollInterval after
// the kill; a scheduled run's first attempt starts on time on a
// surviving replica (TestLeaderKilledScheduleRunsOnAnotherReplica checks
// the 22 s bound and the election).
// These intervals are River's own (v0.51: not settable through
// river.Config); what bounds the stall on valet's side is:
//
//   - stopping replicas gracefully: an engine whose context ends
//     (trigger.Engine.Run, on SIGTERM) stops River, which resigns, and
//     another replica is elected at once; a run due then starts within
//     River's scheduler tick, 5 s, plus a fetch (measured: 25–62 ms late,
//     TestLeaderStoppedHandsOverAtOnce);
//   - FetchPollInterval, the last step of either bound;
//   - the Skip policy's grace (trigger.Config.Grace, default a minute),
//     which must stay above the kill's bound, or a Skip task's run
//     delayed by a leader loss is taken for a missed one and dropped.
//
// Runs queued to start at once (an event's, a chained run) and runs
// already available do not wait for a leader: every replica's workers
// fetch them. The runs the killed process had under way come back after
// RescueStuckJobsAfter (see Runs as River jobs), through the new leader's
// rescuer.
//
// # Testing the River path
//
// A test of a daily 08:00 task on this store cannot wait for River, which
// fetches jobs by the database's time. Instead it gives one
// clock/clocktest.Clock to the store (Config.Clock) and the engine
// (trigger.Config.Clock), does not start the engine, moves the clock and
// calls [Store.WorkDue](ctx, engine, clk.Now()): the runs whose jobs are
// due at that time are worked at once, in the calling goroutine, through
// the same code as River's worker, and their jobs finished as River would
// (completed with the run's record and the next run's job in one
// transaction; retryable at the task's backoff after a failure;
// discarded, the task DEAD, after the last attempt). It returns how many
// it worked, so a test checks that nothing ran at 07:00, one run at 08:00,
// and the next at 08:00 tomorrow, without sleeping. Runs queued to start
// at once (an event's, a chained run) are scheduled by the database's
// time.
//
// # Watching runs
//
// River UI (riverqueue.com/riverui) pointed at the same database shows
// the queue's jobs: scheduled, running, retryable, completed, and
// discarded ones with their errors; [Store.Client] gives the River client
// for the same in code.
package rivertrigger
