// Command travel is valet's reference bot for Agent-Tools and approvals:
// one message starts several things at once, and the one action that
// matters — an email — waits for the user, who changes it while approving.
//
// Run it from the repository root (no API key, no servers, no network):
//
//	go run ./examples/travel
//
// It plays two user messages through agent.Orchestrator.Stream and prints
// every step:
//
//  1. "find me a flight SFO→NYC next Friday, check the weather there and
//     email the plan to team@example.com". The model calls search_flights
//     (an Agent-Tool) and get_weather (a plain tool) in one turn, and the
//     orchestrator runs them concurrently. With their results the model
//     drafts the plan and calls send_email, an Agent-Tool that needs
//     approval: it is parked in the pool instead of running, nothing is
//     sent, and the run ends waiting_for_approval with the request shown by
//     approval.Present.
//  2. "yes, but send it to me instead". The orchestrator serves the waiting
//     agent first. The reply is more than a bare yes (approval.Quick), so
//     approval.Resolve asks the model, through the forced tool
//     resolve_approvals, what it decides: an edit of the recipient to the
//     user's own address (me@example.com, the sender shown in the
//     approval). The edited email is sent once, and the model reports it.
//
// The outbox — a fake mail server — then prints what was really sent.
// -reply changes the answer: "yes" takes the fast path (no model call) and
// sends to team@example.com, "no" cancels.
//
// # Surviving a restart
//
// With -redis the pool lives in Redis (pool/redispool, and its Locker
// serialises the conversation across processes), so the pending approval
// outlives the process that raised it:
//
//	go run ./examples/travel -redis redis://127.0.0.1:6379/0 -step=ask
//	go run ./examples/travel -redis redis://127.0.0.1:6379/0 -step=answer
//
// -step=ask sends the request and exits with the approval pending in
// Redis. -step=answer, in a fresh process, finds it with
// Orchestrator.ListPendingApprovals and answers it; the approval is taken
// from Redis atomically, so the email goes out once even if two processes
// answer at the same time. Answer within 30 minutes
// (LoopConfig.ApprovalTimeout). Without -step, both messages run in one
// process on the Redis pool. Keys start with "valet:travel-demo:", and a
// completed flow leaves none behind.
//
// # The clock
//
// In memory the demo's clock is pinned (Config.Clock, a clocktest.Clock nothing advances) to Sunday 7 June 2026,
// 10:00 in San Francisco, so "next Friday" is always 12 June 2026 and every
// run prints the same plan. With -redis the clock is the real one: Redis
// expires pool entries on the real clock, and an approval stamped with a
// pinned clock in the past would count as expired at once. The pool's
// clock must always be the orchestrator's: that is why the in-memory pool
// is made with pool.NewMemory(pool.MemoryConfig{Clock: clk}).
//
// # The model
//
// Without OPENAI_API_KEY the model is an llmtest.Script answering by a
// function of each request (script.go): it tells a loop turn from the
// forced resolve_approvals call and from the tool-less call that phrases
// the question, reads today's date from the system prompt, and writes its
// answers from the tool results it is sent. With OPENAI_API_KEY set, the
// same program talks to a real model through openai.FromEnv
// (OPENAI_BASE_URL and OPENAI_MODEL optional); -offline keeps the script.
// -v logs debug traces to stderr.
//
// # The files
//
//   - main.go: the agents and the tool — typed input structs whose tags
//     are the schema (format=email, format=date, a rule tag), Validate,
//     Approval with AllowModification — and the wiring;
//   - print.go: the conversation as a chat UI would show it;
//   - backends.go: the fake flight search, weather service and outbox;
//   - script.go: the offline model.
package main
