// Package mcptool offers the tools of an MCP (Model Context Protocol)
// server to the model as tool.Tools, over the official Go SDK
// (github.com/modelcontextprotocol/go-sdk, which speaks MCP 2026-07-28
// and falls back to 2025-11-25 and older).
//
// # Connecting
//
// A Server says how to reach one server: a command speaking MCP on its
// stdin and stdout, or a streamable HTTP endpoint. Connect starts it,
// completes the handshake within Config.InitTimeout and lists its tools:
//
//	fs, err := mcptool.Connect(ctx, mcptool.Server{
//		Name:    "fs",
//		Command: "npx",
//		Args:    []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"},
//	}, mcptool.Config{})
//	if err != nil { ... }
//	defer fs.Close()
//
//	o, err := agent.NewOrchestrator(agent.Config{
//		LLM:         model,
//		ToolSources: []agent.ToolSource{fs},
//	})
//
// A Set is an agent.ToolSource: the orchestrator reads it at the start of
// each run, so a tool list the server changes (it sends
// notifications/tools/list_changed) reaches the model from the next run
// on. Call Set.Tools yourself to put the tools in a tool.Registry.
//
// # Names, schemas, risk
//
// A tool is named after the server and itself, "fs_read_file", with every
// character outside [a-zA-Z0-9_-] replaced by '_' and long names shortened
// with a hash, to fit the ^[a-zA-Z0-9_-]{1,64}$ that model APIs require.
// Two server tools that would get the same name are refused, as is a tool
// whose input schema is not a JSON object schema or does not compile (a
// remote $ref is never fetched): Set.Refused lists them with the reason,
// and the server's other tools stay usable.
//
// What a server lists is sent to the model with every request, so it is
// bounded: a description longer than Config.MaxDescriptionBytes (4 KiB)
// is cut and ends with a note saying so; a tool whose input schema is
// larger than Config.MaxSchemaBytes (64 KiB) or nests objects and arrays
// deeper than Config.MaxSchemaDepth (32) is refused before its schema is
// compiled. Compiled schemas are kept by a hash of their JSON, so a
// listing that changed nothing compiles nothing; listing and compiling
// happen within Config.InitTimeout, without holding up calls or Close.
//
// The model's arguments are validated against the server's input schema
// before the call, like the arguments of any tool: invalid ones come back
// to the model as a *tool.ArgumentError listing every problem, and the
// server is not called.
//
// The server's annotations give the tool's tool.Risk (tool.SettingsOf):
// a read-only tool is low, one that says it is not destructive medium,
// any other high — MCP's defaults make a tool without hints
// destructive. Annotations are the server's claims, not guarantees. The
// orchestrator acts on the risk (see "Risk" in package agent): a high-risk
// call waits for the user's approval unless agent.LoopConfig.RiskPolicy
// lowers it.
//
// # Results
//
// Text content is joined with newlines; structured content is added as
// JSON (unless the text already is that JSON); images, audio and binary
// resources are described in a line, never dumped. A result longer than
// Config.MaxResultBytes is cut and says so. A result the server marks
// isError is an error (matching ErrToolFailed) whose text the model reads
// as the tool's failure. No message larger than Config.MaxMessageBytes
// (16 MiB) is read, over stdio or HTTP: the call fails saying so. Whatever a server returns is untrusted data: the
// orchestrator gives it to the model as a tool result, never as
// instructions.
//
// # Changed tools ("rug pulls")
//
// The tools listed at Connect, and tools that appear later, are offered
// as they are. When a listing shows that an offered tool's description,
// input schema or risk changed, that tool is held back: it is no longer
// offered, a call to it fails with ErrHeldBack, and a WARN line says so
// once. The host reviews Set.Changed and takes a change with Set.Accept:
//
//	for _, c := range fs.Changed() {
//		if reviewed(c) { // c.OldDescription → c.Description, c.OldSchema → c.Schema
//			err := fs.Accept(c)
//		}
//	}
//
// # Failures
//
// Every failure is an error result the model reads, never a stuck run: a
// call the server does not answer within Config.CallTimeout fails with
// ErrTimeout (and a server that then does not answer a ping either is
// stopped); a server that dies or forgets its session fails the call in
// flight, wrapping ErrUnavailable, and is started again (a new process, a
// new HTTP session) on the next call or listing, which also lists its
// tools again. After a failed start, attempts wait Config.RetryDelay,
// doubling, so a dead server costs a run nothing but a WARN line.
//
// Close stops the session and a command's whole process group, and
// cancels a start of the server in progress: a Tools or call waiting for
// it returns ErrClosed at once.
package mcptool
