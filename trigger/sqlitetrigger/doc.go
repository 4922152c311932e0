// Package sqlitetrigger is trigger.Store and trigger.Dispatcher on an
// SQLite file: valet's durable triggers with no server to run. Runs go
// through River on its riversqlite driver, as trigger/rivertrigger's go
// through River on PostgreSQL: one River job per due run, retried with
// the task's backoff, rescued from a process that died mid-run, with the
// run's record, the task's next time and the next run's job written in
// one transaction.
//
//	import _ "modernc.org/sqlite" // the "sqlite" driver, in your main package
//
//	db, err := sql.Open("sqlite", "file:valet.db?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)")
//	db.SetMaxOpenConns(1) // River's advice for SQLite
//	store, err := sqlitetrigger.New(db, sqlitetrigger.Config{})
//	err = store.Migrate(ctx) // once per start; idempotent
//	engine, err := trigger.New(trigger.Config{Store: store, Executors: ...})
//	err = engine.Run(ctx)
//
// New takes the *sql.DB the host opened (and closes); every field of
// Config has a zero-value default. The package imports no SQLite driver:
// the program does, once, as above.
//
// # Opening the file
//
// busy_timeout makes a connection wait for another's write lock rather
// than fail (Migrate refuses a connection without one, ErrNoBusyTimeout);
// WAL lets readers go on while one connection writes. River's
// riversqlite driver advises db.SetMaxOpenConns(1): SQLite has one
// writer at a time, and River's own operations, some of which read
// before they write, would otherwise meet "database is locked". The
// Store's own transactions write first, so they take the write lock
// before they read, on any pool.
//
// # Throughput and synchronous
//
// Each Create, and each run (its start, its record, River's fetch and
// completion), commits transactions of its own, and at SQLite's default
// synchronous=FULL every commit waits for the disk. In WAL mode,
// synchronous(NORMAL) (add _pragma=synchronous(NORMAL) to the DSN) keeps
// every committed transaction through a crash of the process, SIGKILL
// included, and may lose the last ones on a power loss or an operating
// system crash; the file is not damaged either way. On a loaded 2-core
// machine BenchmarkRiverSQLiteVsPostgres measured NORMAL at about four
// times FULL's task creations per second and twice its due runs per
// second; the choice is the host's, in the DSN.
//
// # What a transaction holds
//
// As on PostgreSQL: Create and Update queue the task's run at NextRun
// (River's unique jobs: one job per task and due time) in the
// transaction that writes the task; Finish writes the run's record, the
// task, the task's next run, a chained task's run, the run's notice (a
// NotifyJobKind job keyed by the notice's idempotency key: the outbox)
// and the job's completion in one transaction; SwapRun and SettleRun
// (trigger.RunSettler) write a settled run, its notice, and its task's
// move out of PENDING_APPROVAL together; a run recorded waiting queues
// the expiry of its approvals (ExpiryJobKind) with the record.
//
// # One dispatching process per file
//
// River's SQLite driver is made for one process working a file's jobs,
// so Dispatch (trigger.Engine.Run) takes an exclusive lock on the file
// beside the database named by its path and "-valet-trigger.lock", held
// until Dispatch returns. A second process (or a second Store in the same
// process) that dispatches the same file gets ErrDispatching from
// Engine.Run, naming the lock file; the lock is the kernel's (flock), so
// a killed process leaves none behind and its successor starts at once.
// Other processes may still open the file and create, update or list
// tasks: their jobs are worked by the dispatching one. On systems
// without flock (Windows) no lock is taken: run one engine per file. A
// database in memory needs no lock.
//
// Since one process works the jobs, the cross-replica machinery of
// rivertrigger is left out: no tenant window (runs go in River's order:
// priority, then due time), no namespace claim on an event bus, no
// settlement keeper.
//
// # Times
//
// River keeps times to the millisecond on SQLite, and so does the Store:
// a task's and a run's times read back truncated to the millisecond.
//
// # Tables
//
// Migrate creates valet_trigger_tasks, valet_trigger_runs and
// valet_trigger_write (kept empty: every write transaction of the Store
// begins with a DELETE on it, which takes SQLite's write lock), records SchemaVersion under "trigger/valet_trigger" in
// valet_schema_versions (a file recording a newer version is refused
// with ErrSchemaTooNew, naming both, before anything is written), and
// brings River's tables (river_job, river_leader, river_queue, …) to the
// version its release needs with rivermigrate. Processes starting
// together migrate one after the other: Migrate holds a lock on the file
// named by the database's path and "-valet-trigger-migrate.lock" (on
// systems with flock; elsewhere, migrate from one process at a time).
package sqlitetrigger
