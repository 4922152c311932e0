// Package llm defines the vocabulary valet uses to talk to a language model:
// messages, tool calls, tool specifications, requests, responses, streamed
// chunks, token usage, the [Client] interface every model backend
// implements, and [Embedder], which turns texts into vectors for vector
// recall.
//
// A backend ([github.com/valetkit/valet/llm/openai] for OpenAI and
// OpenAI-compatible servers, [github.com/valetkit/valet/llm/llmtest] for
// scripted tests) turns these values into wire calls and reports failures as
// [*Error] values carrying an [ErrorKind]. Callers decide what to do with a
// failure by its kind, never by parsing messages:
//
//	resp, err := client.Complete(ctx, req)
//	switch llm.KindOf(err) {
//	case llm.KindRateLimited:
//		time.Sleep(llm.RetryAfter(err))
//	case llm.KindContextOverflow:
//		// shorten the history and try again
//	}
//
// A [Request] says what it is for in its [Purpose] (valet's orchestrator
// sets it on every call: the loop, phrasing, approvals, compaction, fact
// extraction ...). Clients never send it to the model; test doubles and
// observability read it.
//
// Tool-call pairing is the one invariant every conversation must keep: each
// assistant tool call is answered by exactly one tool message with its ID
// before the next assistant or user message. [CheckPairing] verifies it.
//
// # Fallback chains
//
// [NewFallback] wraps a primary client and the clients to try when it is
// down: a call moves to the next one on an unavailable model (after a
// retry) or a rate limit longer than MaxWait, never on an auth failure, a
// bad request or a context overflow, and a stream only before its first
// chunk. A switch is never silent: it goes to the hook the ctx carries
// ([WithSwitchHook]; valet's orchestrator logs it at WARN, tells its
// Observer and adds a span event) or is logged, and Response.Model names
// the model that answered. A conversation ([WithConversation]) stays on
// the model that answered it for StickFor:
//
//	chain, err := llm.NewFallback(llm.FallbackConfig{
//		Primary:   anthropic.New(anthropic.Config{}),
//		Fallbacks: []llm.Client{openai.New(openai.Config{})},
//	})
package llm
