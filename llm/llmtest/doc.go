// Package llmtest is the mock model for testing bots built on valet.
//
// [Script] is an in-process [llm.Client] that answers from scripted replies
// (or a function of the request) and records every request, so a test can
// assert both what the bot did and what it sent the model:
//
//	model := llmtest.NewScript(
//		llmtest.Calls(llmtest.Call("get_weather", `{"city":"Paris"}`)),
//		llmtest.Text("It is sunny in Paris."),
//	)
//
// [Server] is an OpenAI-compatible HTTP server (on httptest) for end-to-end
// tests of a real HTTP client, with injectable failures: status codes,
// Retry-After, latency and dropped streams. Like the real API it answers 400
// when a request's tool messages do not answer the preceding tool calls.
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
//   - [Server.Inject] queues [Fault] values that the next requests take one each:
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
package llmtest
