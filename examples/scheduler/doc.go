// Command scheduler is valet's reference bot for proactive tasks: an
// assistant that acts on its own initiative, through package trigger.
// Alex sets up four tasks, one of each kind:
//
//   - a morning digest, every day at 08:00 in Paris (a cron schedule,
//     "0 8 * * *" in Europe/Paris): the model reads the inbox with a tool
//     and sums up the last 24 hours of mail;
//   - "email arrived": an event task on source "gmail", type
//     "message.received", with the filter from.domain = amazon.com, so
//     that only Amazon's mail makes the assistant speak up;
//   - a price watch: the condition flight_price_below_300, polled every
//     15 minutes, which fires once when the Paris → New York fare goes
//     under 300 € (the false→true edge), not again while it stays under;
//   - "remind me at 3 pm to call the dentist back": a one-time task
//     (Schedule.At), COMPLETED once it has run.
//
// Every task runs through the assistant: agentexec.New(orchestrator,
// agentexec.Config{}) is the engine's trigger.DefaultExecutor, and each
// run becomes a message to the model, tagged with what fired it
// ("[Scheduled Task] …", "[Event Trigger] message.received: …" followed
// by the event in an <event_data> block, "[Condition Trigger]
// flight_price_below_300: …"). The answer goes to Alex through the
// Notifier of the "chat" channel (each task's Output), which
// prints it as "[time] task name: text".
//
// # Offline: two days in a fraction of a second
//
// Run it from the repository root (no API key, no servers, no network):
//
//	go run ./examples/scheduler
//
// The engine keeps its defaults — a trigger.MemoryStore and a
// trigger.MemoryBus — on a clocktest.Clock that starts on Monday 2 March
// 2026 at 07:00 in Paris. The program moves it a quarter of an hour at a
// time through two days, waiting after each step for the engine to finish
// what the step made due (triggertest.WaitIdle), and publishes emails on the way: Amazon's
// shipping notice (which fires the event task), the same event again, as a
// webhook retried (which does not: a task runs once per event id), and two
// emails from elsewhere (which do not match the filter). It prints what
// reaches the chat, then each task's runs from the store's history. The
// output is the same on every run; main_test.go checks it.
//
// # Live: PostgreSQL, Redis and two processes
//
// With -postgres and -redis the tasks live in PostgreSQL and run through
// River (trigger/rivertrigger, its tables created at start with Migrate),
// the events go through a Redis stream read by a consumer group
// (trigger/redisbus), and the clock is the real one. The timeline shrinks
// to about a minute: the digest every 15 seconds, the reminder after 20,
// the fare checked every 4 seconds and under 300 € after 35, the emails a
// few seconds apart. Start two processes at once, only one of them
// publishing the emails:
//
//	PG='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	RD='redis://127.0.0.1:6379/0'
//	go run ./examples/scheduler -postgres "$PG" -redis "$RD" -name A -publish &
//	go run ./examples/scheduler -postgres "$PG" -redis "$RD" -name B
//
// Both work the same tasks: each run is one River job, unique by task and
// due time (or event id), so whichever process takes it runs it and the
// other never does, and each email event goes to one consumer of the
// group. Every line in the chat appears once, from A or from B, and at the
// end both print the same history. The processes set the tasks up in turn
// under a PostgreSQL advisory lock: the first clears what an older demo
// left and creates the tasks, the second finds them and joins (CreateTask
// refuses a task that exists with ErrConflict, which the program ignores).
// The demo has its own River queue (valet_scheduler_demo); a search_path
// in the URL chooses the schema of its tables, and the Redis stream is
// named from the database and schema (valet:<database>/<schema>:events,
// redisbus.Config.Namespace set to the store's Namespace), so demos on
// two schemas sharing a Redis keep their events apart. -duration changes its length and -v logs the
// engine's traces to stderr.
//
// # The files
//
//   - main.go: the tasks, the wiring (orchestrator, executor, condition,
//     notifier) and the chat;
//   - offline.go: the fake clock and how to wait for the engine between
//     two steps;
//   - live.go: River, Redis, and the setup shared by processes;
//   - bot.go: the tools (a fake inbox and fare service), the simulated
//     world they read, and the offline model, an llmtest.Script that
//     answers each kind of triggered message.
package main
