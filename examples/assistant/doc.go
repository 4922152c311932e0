// Command assistant is valet's reference bot: a ReAct assistant with four
// tools — get_weather, web_search, calculator and calendar_today, which
// needs the user's Google credential — that runs with no API key, no
// servers and no network.
//
// Run the demo conversation from the repository root:
//
//	go run ./examples/assistant
//
// It plays a short conversation through agent.Orchestrator.Stream and
// prints each step: the model's text as it streams, every tool call as it
// starts and ends (two weather calls run in parallel; a calculator call with
// a wrong argument fails validation and the model corrects it; the calendar
// asks for a Google account until the host connects one), and the
// telemetry of each message (status, turns, tool calls, tokens, time).
//
// Chat with it:
//
//	go run ./examples/assistant -i
//	echo "what's the weather in Rome" | go run ./examples/assistant -i
//
// # The model
//
// Without OPENAI_API_KEY the model is an llmtest.Script, valet's mock
// client, answering from what each request holds (see script.go): the demo
// conversation, or in -i mode a simple model that picks a tool by keyword
// and summarises its result, and otherwise answers from memory (below).
// With OPENAI_API_KEY set, the same program
// talks to a real model through openai.FromEnv; OPENAI_BASE_URL points it
// at any OpenAI-compatible server (Ollama, vLLM, LiteLLM, Azure...) and
// OPENAI_MODEL picks the model:
//
//	OPENAI_API_KEY=sk-... go run ./examples/assistant
//	OPENAI_API_KEY=unused OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.1 go run ./examples/assistant -i
//
// With ANTHROPIC_API_KEY set instead, it talks to Claude through
// anthropic.FromEnv (Anthropic's Messages API, with prompt caching);
// ANTHROPIC_MODEL picks the model (default claude-sonnet-4-5) and
// ANTHROPIC_BASE_URL the endpoint. When both keys are set, OpenAI answers
// and Claude takes over when OpenAI is overloaded or rate-limited for long
// (llm.NewFallback; each switch is a WARN line):
//
//	ANTHROPIC_API_KEY=sk-ant-... go run ./examples/assistant -i
//
// -offline keeps the scripted model even when a key is set, -tz sets the
// user's time zone (default Europe/Paris) and -v logs debug traces to
// stderr.
//
// # MCP servers
//
// -mcp plugs in the tools of an MCP server started by a command (stdio),
// named "mcp_<tool>", through agent.Config.ToolSources and
// tool/mcptool:
//
//	OPENAI_API_KEY=sk-... go run ./examples/assistant -i -mcp 'npx -y @modelcontextprotocol/server-everything'
//
// The offline script never calls them; a real model does when they fit.
//
// # Credentials
//
// calendar_today reads the tenant's "google" credential through
// tool.ExecContextFrom(ctx).Credentials, the store of agent.Config.Credentials
// bound to the message's tenant. Until there is one it answers, as a normal
// result, that the user has not connected a Google account, and the model
// relays how to connect it. With one, it calls a fake calendar with the
// access token; the token is never printed, logged or shown to the model.
//
// Credentials are saved by the host, never by the model. In -i mode, lines
// starting with "/" are the host's and never reach the model:
//
//	/connect google TOKEN   saves {"access_token": TOKEN} for the demo tenant
//	/disconnect google      deletes it
//
// The demo conversation does the same with a fake token. A real app would
// save the tokens at the end of its OAuth flow.
//
// Where credentials, history and facts are kept:
//
//   - -i without -db or -postgres: one SQLite file, by default
//     assistant.db in the valet-assistant folder of the user's
//     configuration directory (os.UserConfigDir: ~/.config on Linux);
//     its path is printed at start. -db FILE chooses another; -db
//     :memory: keeps everything in memory.
//     sqlitedb.Open creates the tables at start; the pool of waiting
//     tools and approvals is kept there too. Credentials are
//     encrypted with AES-256-GCM under the key in VALET_CREDENTIALS_KEY
//     or, when that is unset, under a key kept beside the database in
//     FILE.key (32 random bytes in base64, mode 0600, created on the first
//     run and named in the output); the key is never written into the
//     database. Keep the key file with the database: without it the saved
//     credentials cannot be read. A key file other users may read is
//     refused.
//   - -postgres URL: a PostgreSQL database, encrypted under the key in
//     VALET_CREDENTIALS_KEY (required). The tables are created at start
//     (pgstore and pgmemory Migrate); a search_path in the URL chooses
//     their schema.
//   - the scripted demo (without -i): in memory, so that every run plays
//     the same conversation from the same start; -db or -postgres keep it
//     there too.
//
// For example:
//
//	go run ./examples/assistant -i -db /tmp/valet.db
//	export VALET_CREDENTIALS_KEY="$(openssl rand -base64 32)" # keep it: without it the credentials cannot be read
//	go run ./examples/assistant -i -postgres 'postgres://postgres@localhost:5432/valet?sslmode=disable'
//
// # History and memory
//
// The orchestrator keeps the conversation's history in agent.Config.Memory
// and sends the model its newest messages with each new one. With
// agent.MemoryOptions.Extract it also learns: after each answer, in the
// background, one model call (forcing the remember_facts tool) reads the
// user's message and the answer and picks out durable facts about the user
// (preferences, people, dates), which are stored as long-term items; each later message recalls the items relevant to it
// into a <background> block at the end of the system prompt. Before the
// program exits it waits up to 10 seconds for extractions under way
// (agent.Orchestrator.Close).
//
// The offline models answer the extraction call too: each sentence of the
// user's message that starts with "My" or "I" and is neither a question nor
// a request ("I want...", "I need...") becomes a fact in the third person
// ("My dentist is Dr. Kim." → "The user's dentist is Dr. Kim."), and a
// changed one ("My dentist is Dr. Lee.") supersedes the recalled fact it
// replaces. In -i mode the offline model
// answers "who is my dentist?" from the recalled facts (or, when none
// matches, from what the user said earlier in the conversation) and "what
// did I say first?" from the history the request holds.
//
// In memory, history and facts live in the process (the default bounded
// memory.NewInMemory provider) and are lost at exit. In the SQLite file
// (memory/sqlitememory) or on PostgreSQL (memory/pgmemory), beside the
// credentials, they survive: after a restart the bot still has the
// conversation and what it learned. Every run is the same tenant
// ("demo-user") and conversation ("demo"), so a new run continues the
// conversation of the last:
//
//	go run ./examples/assistant -i # "My dentist is Dr. Kim.", then exit
//	go run ./examples/assistant -i # "Who is my dentist?", "What did I say first?"
//
// # Transcripts
//
// With -transcript DIR every step of every run (each model request and
// reply, tool call and result, retry, approval) is appended to a JSONL
// file of the conversation under DIR, named from a hash of the tenant and
// conversation (agent/transcript), secrets redacted. The demo prints the
// file's path; examples/transcript sums it up per run:
//
//	go run ./examples/assistant -offline -transcript /tmp/tx
//	go run ./examples/transcript /tmp/tx/*.jsonl
//
// # The files
//
//   - main.go wires the orchestrator and prints the stream of events;
//   - tools.go defines the tools, the way real ones are written: typed input
//     structs whose tags are the schema, ctx honoured, tool.ExecContextFrom
//     for tenant, logger and credentials;
//   - storage.go opens the credential store and the memory provider, in
//     memory, in one SQLite file (sqlitedb.Open) or on one PostgreSQL
//     pool;
//   - credentials.go reads (or, for the SQLite file, creates) the
//     credentials key and runs the host's
//     /connect and /disconnect;
//   - mcp.go starts the -mcp server;
//   - script.go is the offline model, its fact extraction included.
package main
