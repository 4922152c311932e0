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
// # Durably
//
// With -postgres the results and task graphs live in PostgreSQL
// (agent/delegate/pgdelegate, the tasks run as River jobs; the host runs
// the engine with Orchestrator.TaskExecutor), and with -redis the pool of
// waiting agents and the conversation lock live in Redis
// (pool/redispool), so background work and the pending approval survive a
// restart:
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
