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
package llmtest
