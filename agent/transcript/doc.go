// Package transcript writes a JSONL transcript of every run of an
// orchestrator, and reads one back into a summary per run.
//
// An Observer is an agent.Observer (agent.Config.Observer). It writes one
// JSON object, a Record, per line for each step of each run: the run's
// start and end, each model request and response, retries, tool calls and
// results, approvals raised and decided, compactions, recall, notes.
// Every text is redacted first (agent.RedactText: API keys, bearer
// tokens, passwords in URLs, secret name=value pairs) and tool arguments
// are redacted whole (agent.RedactArguments), so a transcript can be
// kept and shared like a log. Hostile text cannot break the framing: line
// breaks of every kind are escaped.
//
// It writes either to one io.Writer, or to a directory holding one file
// per conversation, appended to run after run and named from a hash of
// the tenant and conversation ids (FileName), never the ids themselves:
//
//	tx, err := transcript.New(transcript.Config{Dir: "/var/lib/bot/transcripts"})
//	if err != nil { ... }
//	defer tx.Close()
//	o, err := agent.NewOrchestrator(agent.Config{LLM: model, Observer: tx})
//
// An Observer never holds a run up: it encodes a step on the run's
// goroutine and writes it on its own, dropping steps (Dropped counts them)
// when the writer falls Config.Buffer behind. A directory that cannot be
// written is logged once (Failed counts the lines lost) and runs go on.
// Flush waits for the lines queued; Close flushes and stops.
//
// Read reads a transcript back, skipping lines that are not records (a
// line torn by a crash) with an error wrapping ErrMalformed; Summarize
// sums up each run: turns, model calls, retries, tool calls by name with
// their failures, tokens, cost, errors, status and duration. The program
// examples/transcript prints the summary of a transcript file.
package transcript
