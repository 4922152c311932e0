// Command specialists is valet's reference bot for delegation: a
// coordinator with two specialists, skills loaded from SKILL.md files,
// that runs a two-task graph in the background and tells the user when it
// is done.
//
// Run it from the repository root (no API key, no servers, no network):
//
//	go run ./examples/specialists
//
// The skills are skills/research/SKILL.md (web_search only) and
// skills/writer/SKILL.md (send_email only), embedded in the binary (embed.FS)
// and loaded with skill.Load; the coordinator's system prompt lists only
// their names and descriptions. It plays this conversation:
//
//  1. "Find me a quiet hotel in Lisbon for next week and draft a note to
//     Ana about it." The coordinator calls spawn_agent with two tasks —
//     research (skill research) and write (skill writer, depends_on
//     research, its context "The research: [agent_result:research]") — as
//     a graph that runs in the background. The call returns at once with
//     the graph's id and the coordinator answers that the work is under
//     way.
//  2. In the background the research specialist searches and compares;
//     its result is stored before the writer starts, and the writer is
//     given it resolved from the reference, framed as untrusted data in an
//     <agent_result> block. The demo prints what the writer was sent.
//  3. When the graph ends, its end arrives in the conversation as a new
//     message — the path a triggered run takes, not the user's words —
//     listing the tasks and their results; the coordinator reacts, and
//     agent.SubAgentOptions.OnBackground hands that reaction to the host,
//     so the user hears of it without asking.
//  4. "Looks good, send it to Ana." The coordinator starts the writer
//     specialist in the foreground, its context a reference to the draft
//     ([agent_result:<graph>.write]), not the text. The writer calls
//     send_email, an Agent-Tool that needs approval (email.go): the
//     specialist is parked with its loop state in the pool, and the
//     coordinator's run ends waiting for approval with the request the
//     user sees, naming the specialist that asked.
//  5. "yes". The email is sent once (the outbox shows it), the specialist
//     goes on where it stopped, and its answer reaches the coordinator,
//     which reports it.
//
// Then a longer task, kept safe and steerable (scenes.go, trip.go):
//
//  6. "Book Hotel Jardim for Ana and me, 5 nights from Monday, and pay the
//     deposit." The coordinator keeps a plan (Config.Plan: update_plan) and
//     calls reserve_room, which waits for the hotel's booking system.
//  7. "Actually make it 4 nights." sent while reserve_room waits: with
//     LoopConfig.RouteWhileRunning the message is classified (one cheap
//     call) as a correction and routed into the running loop (it returns at
//     once with StatusInjected); once reserve_room returns, the
//     coordinator's next request ends with it, framed as written while it
//     worked, and it reserves 4 nights instead.
//  8. The coordinator pays the 250 EUR deposit with pay_deposit. The risk
//     policy (LoopConfig.RiskPolicy, trip.go) decides from the amount: up
//     to 100 EUR runs, up to 1000 EUR is HIGH and waits for the user's
//     approval (a pool entry "tool:pay_deposit"), above is CRITICAL. "yes":
//     the deposit is paid once, and the plan (Result.Plan) shows the steps
//     done.
//  9. "Also pay the whole stay for our group of 12 now: 5400 EUR." The call
//     is CRITICAL: it is denied without running, and the model reads the
//     denial and tells the user.
//  10. "Is Casa do Rio free that week too?" The model asks
//     check_availability the same question again and again: the doom-loop
//     detector sends a note, then a firmer one, then stops the run with
//     agent.ErrDoomLoop and the answer the model gives from what it found.
//
// The payments the demo made are listed at the end: the one deposit.
//
// # Durably
//
// With -postgres the results and task graphs live in PostgreSQL
// (agent/delegate/pgdelegate, the tasks run as River jobs; the host runs
// the engine with Orchestrator.TaskExecutor), and with -redis the pool of
// waiting agents and the conversation lock live in Redis
// (pool/redispool), so background work and the pending approval survive a
// restart; with -redis the loops are also steered through Redis
// (redispool.NewControl), as replicas sharing it would be:
//
//	go run ./examples/specialists -postgres 'postgres://postgres@localhost:5432/valet?sslmode=disable' -redis redis://127.0.0.1:6379/0
//
// -schema puts pgdelegate's and River's tables in a schema of their own
// (it must exist). Each durable run works in a conversation of its own,
// since the storage may hold an earlier run's work.
//
// The model is an llmtest.Script answering each request by a function of
// it (script.go): it tells the coordinator from a specialist by the
// system prompt and writes its answers from what it was sent. -v logs
// debug traces to stderr.
package main
