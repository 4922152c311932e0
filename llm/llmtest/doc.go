// Package llmtest is the mock model for testing bots built on valet.
//
// [Script] is an in-process [llm.Client] that answers from scripted replies
// (or a function of the request) and records every request, so a test can
// assert both what the bot did and what it sent the model:
//
//	model := llmtest.NewStrictScript(t,
//		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`)),
//		llmtest.Text("It is sunny in Paris."),
//	)
//
// [Embedder] is a deterministic [llm.Embedder]: texts sharing words get
// similar vectors, and [Embedder.Concept] makes chosen words alike, so a
// test can have a query recalled by similarity alone; [Embedder.Fail]
// makes it fail:
//
//	emb := llmtest.NewEmbedder(0).Concept("dentist", "teeth")
//	mem, err := memory.NewInMemory(memory.Config{Embedder: emb})
//
// [Server] is an OpenAI-compatible HTTP server (on httptest) for end-to-end
// tests of a real HTTP client, with injectable failures: status codes,
// Retry-After, latency and dropped streams. It serves embeddings too. Like the real API it answers 400
// when a request's tool messages do not answer the preceding tool calls.
// Its API is also a plain [http.Handler] ([NewHandler]) to serve on any
// address or under a path prefix.
//
// [AnthropicServer] ([NewAnthropicServer]) is the same for Anthropic's
// Messages API: it enforces the API's rules (alternating roles, each
// tool_use answered by a tool_result in the next user turn, at most four
// cache_control breakpoints, max_tokens required) and accounts for prompt
// caching as the API does, per API key, so a test can measure what caching
// saves ([AnthropicServer.Usage]). The same [Fault] values inject failures
// into both servers ([Overloaded] and [HTMLError] among them).
//
// [ClientContract] is the behaviour every llm.Client backend shares (tool
// round trips, streaming, error kinds, dropped streams, cancellation), run
// against either fake server; llm/openai and llm/anthropic pass it.
//
// # Strict scripts
//
// A script must match the bot's model calls one for one, and the
// orchestrator makes more calls than the loop's: it phrases questions and
// approval requests in the persona (a call without tools), reads the
// user's answer to pending approvals and to requests for missing fields
// (calls forcing a tool, see below), compacts the history and extracts
// facts to remember (see "Scripting by purpose"). Where it can do without
// a reply it falls back quietly, so a script one reply short can still
// pass. A strict script fails the test instead:
//
//	model := llmtest.NewStrictScript(t, replies...) // or llmtest.NewScript(replies...).Strict(t)
//
// When the test ends it reports every call that came after the replies ran
// out ("llmtest: script exhausted: call 4 (phrase) had no reply (3
// scripted)", naming the call's [llm.Purpose]), every reply that did not
// fit its request (see below), and replies left over ("llmtest: 2
// scripted replies were never used"), those given to a purpose with
// [Script.On] on their own line. Strict takes a
// [TestingT] (a *testing.T, or a fake). To check by hand, [Script.Err]
// returns the problems so far and [Script.Remaining] the unused replies.
//
// # Answering approvals and requests for input
//
// When Agent-Tools wait for the user's approval, the orchestrator reads the
// user's next message with a call that forces the resolve_approvals tool,
// whose schema carries the pending approvals' ids. [Decide] answers it by
// position, counting from 0 in the order of Result.PendingApprovals (oldest
// first; those of one turn in call order):
//
//	llmtest.Decide(llmtest.Approve(0), llmtest.Cancel(1), llmtest.Edit(2, `{"to":"me@example.com"}`))
//
// [ApproveAll] and [CancelAll] decide every pending approval, Decide() none;
// [Decision.Because] adds the user's reason. A single pending approval
// answered with a plain "yes" or "no" is decided without a model call, so
// it takes no reply.
//
// When an Agent-Tool waits for missing fields, the orchestrator reads the
// user's answer with a call that forces the provide_fields tool.
// [ProvideFields] answers it with the fields the message gives, and
// [Unrelated] says the message is about something else:
//
//	llmtest.ProvideFields(`{"city":"Paris"}`)
//
// These replies are built from the request they answer. A request without
// the tool they answer (the script is out of step with the bot), a position
// with no pending approval, or a field the waiting agent does not have
// fails the call with [ErrReplyMismatch] (HandleMessage returns it, unless
// the call was one the orchestrator can do without) and is recorded for
// [Script.Err] and a strict script: they never guess. They work in
// [NewScriptFunc] scripts too.
//
// # Scripting by purpose
//
// Every request the orchestrator makes says what it is for in
// [llm.Request.Purpose]: [llm.PurposeLoop], [llm.PurposeFinal] (the answer
// without tools when turns or budget run out), [llm.PurposePhrase],
// [llm.PurposeResolveApprovals], [llm.PurposeProvideFields],
// [llm.PurposeCompact] and [llm.PurposeRememberFacts]. The replies given
// to NewScript answer the calls in order, whatever they are for (fact
// extraction aside, see below), as in the examples above. [Script.On] gives the calls of one purpose replies
// of their own, taken in their own order, so the conversation's replies
// keep theirs whenever those calls come:
//
//	model := llmtest.NewStrictScript(t,
//		llmtest.Text("Noted."),         // the loop, message 1
//		llmtest.Text("Anything else?"), // the loop, message 2
//	).On(llm.PurposeRememberFacts,
//		llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"}),
//		llmtest.Remember(), // nothing to keep from message 2
//	)
//
// This is how to script fact extraction (agent.MemoryOptions.Extract): its
// call runs in the background after each reply, racing the next message,
// so it has no position among the others. A script made with NewScript
// therefore never gives it a reply in order: unless given replies with
// On, each extraction is answered with [Remember]() (remember nothing),
// and a strict script does not count it. A [NewScriptFunc] function gets
// every call, the extractions included. The orchestrator's Close waits
// for the extractions: call it before the test ends, so that a strict
// script sees them. Every other purpose takes the next reply in order
// unless given replies with On.
//
// A strict script checks each purpose given replies apart: a call after
// they ran out ("llmtest: script exhausted: call 7 (remember_facts call
// 3) had no reply (2 scripted)") and replies left over ("llmtest: 1
// scripted remember_facts reply was never used").
//
// The replies to the calls that force one of valet's tools are built
// from the request, and fail with [ErrReplyMismatch] on a request without
// that tool: [Decide], [ApproveAll] and [CancelAll] (resolve_approvals),
// [ProvideFields] and [Unrelated] (provide_fields), [Summary]
// (compact_conversation: a summary and facts) and [Remember]
// (remember_facts: facts, each a [Fact]). The agent package's
// documentation ("Calls valet makes") gives the arguments of each tool.
//
// A [Server] receives no purpose over the wire: it gives a request that
// forces one of these tools that call's purpose, so On works end to end
// for them; the loop, the final answer and phrasing take replies in order.
//
// # The fake OpenAI server
//
// A Server serves any [llm.Client] (usually a Script) at
// POST {Server.URL}/chat/completions, where URL ends in /v1, so an OpenAI
// client only needs its base URL pointed at it:
//
//	model := llmtest.NewScript(llmtest.Text("Hello!"))
//	srv := llmtest.NewServer(model, llmtest.WithAPIKey("sk-test"))
//	defer srv.Close()
//	c := openai.New(openai.Config{Model: "gpt-4o-mini", APIKey: "sk-test", BaseURL: srv.URL})
//
// It also serves POST {Server.URL}/embeddings with the vectors of an
// [Embedder] (or any llm.Embedder given with [WithEmbedder]), so an
// OpenAI client's Embed runs end to end.
//
// It answers in OpenAI's wire format: a chat.completion object (content null
// beside tool calls, arguments as a JSON string, usage), or, for
// "stream": true, server-sent chat.completion.chunk events shaped like
// OpenAI's (a role delta, text in several content deltas, each tool call
// opened with its id and name and its arguments split over several deltas,
// a finish_reason chunk, a usage chunk with no choices when
// stream_options.include_usage is set, then "data: [DONE]").
//
// Failures come three ways:
//
//   - [Server.Inject] queues [Fault] values that the next requests (chat
//     or embeddings) take one each:
//     [RateLimited] (429 with retry-after and retry-after-ms),
//     [Unavailable] (5xx), [ContextOverflow] (400 context_length_exceeded),
//     [Slow] (latency that honours cancellation) and [DropStream] (a
//     connection cut mid-stream, before "data: [DONE]"); or any status and body.
//   - The model returns an [*llm.Error] (e.g. llmtest.Fail(&llm.Error{Kind:
//     llm.KindRateLimited})): the kind picks the HTTP status and body.
//   - Options make it strict for every request: [WithAPIKey] (401
//     invalid_api_key), [WithMaxContextChars] (400 context_length_exceeded
//     past a size, to drive a bot's overflow handling end to end) and
//     [WithLatency].
//
// Like the real API it rejects malformed requests with 400
// invalid_request_error and OpenAI's wording, notably tool messages that do
// not answer the preceding assistant tool calls one for one, so a client or
// bot that breaks the pairing fails in tests as it would in production.
// [Server.Requests] returns every request received, decoded and raw, with
// its headers and the status it got.
//
// A request the model answers spends one Script reply, including one whose
// connection a Drop fault then cuts; a fault with a Status does not reach the
// model.
//
// # Serving the fake API yourself
//
// A [Handler] is the same fake API without a listener: serve it on any
// address, or mount it in another server, e.g. the one serving a frontend
// under test or one a client written in another language talks to. It
// serves POST /v1/chat/completions and /v1/embeddings below where it is
// mounted, once [http.StripPrefix] has removed the prefix:
//
//	fake := llmtest.NewHandler(model, llmtest.WithAPIKey("sk-test"))
//	mux.Handle("/fake/", http.StripPrefix("/fake", fake))
//	// base URL for clients: http://<host>/fake/v1
//	fake.Inject(llmtest.RateLimited(time.Second))
//
// Options, faults and [Handler.Requests] work as on a Server;
// [Server.Handler] returns a Server's own Handler, to mount it elsewhere as
// well. Faults that cut the connection need a real one (not an
// [httptest.ResponseRecorder]). [Handler.Close] ends waits in progress.
package llmtest
