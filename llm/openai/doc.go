// Package openai is the [llm.Client] for the OpenAI Chat Completions API and
// the many servers that speak it: Azure OpenAI, Ollama, vLLM, LiteLLM,
// OpenRouter, Groq, DeepSeek, Gemini's OpenAI-compatible endpoint, Z.ai and
// others. It is built on github.com/openai/openai-go/v3.
//
//	c := openai.New(openai.Config{Model: "gpt-4o-mini", APIKey: key})
//	c, err := openai.FromEnv() // OPENAI_API_KEY (required), OPENAI_BASE_URL, OPENAI_MODEL, OPENAI_EMBEDDING_MODEL
//
//	resp, err := c.Complete(ctx, llm.Request{Messages: msgs, Tools: specs})
//	for chunk, err := range c.Stream(ctx, req) { ... } // text chunks, then chunk.Response
//	vecs, err := c.Embed(ctx, texts)                   // one vector per text: an llm.Embedder
//
// # Other servers
//
// Point [Config.BaseURL] at the API root (the part before
// "/chat/completions"):
//
//	openai.Config{BaseURL: "http://localhost:11434/v1", Model: "llama3.1"}        // Ollama, no key
//	openai.Config{BaseURL: "http://localhost:8000/v1", Model: "Qwen/Qwen2.5-7B"}  // vLLM
//	openai.Config{BaseURL: "http://localhost:4000", APIKey: litellmKey}          // LiteLLM proxy
//	openai.Config{                                                               // Azure OpenAI
//		BaseURL: "https://RESOURCE.openai.azure.com/openai/deployments/DEPLOYMENT?api-version=2024-10-21",
//		Headers: map[string]string{"api-key": azureKey},
//		Model:   "DEPLOYMENT",
//	}
//
// A query in BaseURL is sent with every request. With an empty APIKey no
// Authorization header is sent. [New] reads no environment variables (unlike
// openai.NewClient), so a key in the environment never reaches a server it
// was not meant for. A request's MaxTokens is sent as max_completion_tokens to
// api.openai.com and Azure (whose reasoning models reject max_tokens) and as
// max_tokens to every other server (which may not know the newer field).
//
// Several keys (Config.APIKeys beside APIKey) rotate: a call whose key is
// refused for quota, rate limit or auth goes out again at once with the
// next key, and the refused key rests for Config.KeyCooldown. No key is
// ever printed, in errors, String or LogValue.
//
// # What the client normalises
//
// The replies are decoded leniently, from what servers really send (the
// tests replay recorded exchanges with each of the servers above):
//
//   - tool-call arguments sent as a JSON object instead of a string are
//     accepted; llm.ToolCall.Arguments is always a JSON object: empty
//     arguments become {}, arguments encoded twice are decoded, and anything
//     else (invalid or truncated JSON, an array) is kept as
//     {"_raw_arguments": "<text>"} ([RawArgumentsKey]) so the tool's schema
//     validation reports it to the model instead of the call being lost;
//   - empty, missing or repeated tool-call ids get "call_<n>" (n is the
//     call's position, bumped past any id the reply already uses), so the
//     tool results can be paired; streamed replies get the same ids as
//     the same reply sent whole;
//   - text beside tool calls is kept (Message.Content and Message.ToolCalls);
//     content "" and null are the same; a refusal becomes the content;
//   - unknown fields (reasoning_content, reasoning, extra_content, vLLM's
//     token_ids, OpenRouter's provider and cost, x_groq, obfuscation...) are
//     ignored; usage counts may be numbers or strings.
//
// # Streaming
//
// openai-go builds and sends the request (with "stream": true and
// stream_options.include_usage), but this package reads the server-sent
// events itself from the raw response instead of using openai-go's
// ssestream: ssestream reports a connection that drops before
// "data: [DONE]" as a clean end, and turns Groq's "event: error" and
// OpenRouter's "error" object inside a chunk into unclassified errors. Here:
//
//   - tool-call deltas are assembled by index (several parallel calls, a
//     whole call in one chunk, arguments over dozens of deltas), so two
//     calls that share an id stay two calls (and are renamed as above); a
//     delta with no index continues the call with its id, or the last
//     call; a new id at a used index (Ollama sends every call at index 0)
//     opens a new call. Text deltas are yielded as they arrive, chunks with no
//     choices and repeated finish reasons are fine, usage is taken from
//     whichever chunk carries it (with or without choices);
//   - comment lines (": OPENROUTER PROCESSING" keep-alives) are skipped;
//   - an "event: error" event or a chunk with an "error" object ends the
//     stream with a classified *llm.Error, using the status the error names
//     (Groq's status_code, OpenRouter's numeric code) as its StatusCode;
//   - a body that ends before "data: [DONE]" and before any finish_reason
//     is KindUnavailable (a stream that finished but omitted [DONE] is
//     accepted); a server that ignores "stream" and answers with one JSON
//     object is accepted too;
//   - breaking out of the range closes the response body.
//
// # Size of replies
//
// [Config.MaxResponseBytes] (default [DefaultMaxResponseBytes], 8 MiB, far
// above the longest real reply) caps what one reply may make the client
// read and hold: the body of a non-streamed reply, each line and event of
// a stream, and what a stream accumulates (text, tool-call ids, names and
// arguments, and a fixed cost for each call). Reading stops at the cap and
// the call fails with an *llm.Error of kind llm.KindUnknown, which is not
// retried (the same request would bring the same reply); errors.Is(err,
// [ErrResponseTooLarge]) holds. The body of an error answer is cut at the
// cap; its status still classifies it. A reply may also hold at most
// [MaxToolCallsPerReply] tool calls; one with more fails the same way, with
// [ErrTooManyToolCalls] (which wraps ErrResponseTooLarge) as its cause.
//
// # Embeddings
//
// [Client.Embed] implements llm.Embedder with POST {BaseURL}/embeddings
// (model [Config.EmbeddingModel], default [DefaultEmbeddingModel];
// "dimensions" [Config.EmbeddingDimensions] when set), asking for vectors
// as JSON numbers; a base64 reply is read too. Texts go
// [Config.EmbeddingBatchSize] at a time (default
// [DefaultEmbeddingBatchSize], at most [MaxEmbeddingInputs], OpenAI's
// limit), one request after the other; vectors are put in the order of
// the texts by their "index". A reply with another number of vectors, a
// bad index, or vectors of different lengths fails with
// llm.ErrInvalidEmbeddings as its cause. Sizes, errors and credentials
// are handled as for chat replies (below).
//
// # Errors
//
// Every failure is an *llm.Error (check it with llm.KindOf, llm.RetryAfter,
// llm.IsRetryable). openai-go's own retries are off: the agent loop retries
// by kind. Error bodies are read in every shape seen in the wild (OpenAI's
// {"error":{...}}, integer or string codes, {"error":"text"}, vLLM's
// {"object":"error",...}, non-JSON gateway pages).
//
//   - 429 → KindRateLimited, RetryAfter from retry-after-ms or Retry-After
//     (seconds or an HTTP date). OpenAI's "overloaded" 429 is one too.
//   - 429 with code insufficient_quota (or billing_hard_limit_reached,
//     billing_not_active, access_terminated), and 402 → KindAuth: waiting
//     does not bring credit back; like a bad key, someone has to fix the
//     account, so the loop returns it to the caller at once. Code keeps the
//     provider's code to tell the two apart.
//   - code context_length_exceeded, 413, or a 400/422 whose message says so
//     ("maximum context length", "context length", "too many tokens",
//     "prompt is too long"...) → KindContextOverflow. When the error states
//     the model's window and the request's size ("maximum context length
//     is 128000 tokens. However, your messages resulted in 130532 tokens",
//     vLLM's and llama.cpp's wordings, llama.cpp's n_ctx fields), they are
//     in llm.Error.ContextLimit and ContextUsed; each is 0 when not stated.
//   - 401, 403 → KindAuth; 408, 504, a network timeout or
//     context.DeadlineExceeded → KindTimeout; other 5xx, refused or reset
//     connections, an unexpected EOF → KindUnavailable; other 4xx →
//     KindBadRequest.
//   - A cancelled ctx gives an error for which errors.Is(err,
//     context.Canceled) holds (kind KindUnknown, never retryable).
//
// The API key is never part of an error: messages that echo it have it
// replaced by REDACTED, and [Config] prints and logs it as REDACTED. The same
// holds for the values of credential headers in [Config.Headers] (Azure's
// "api-key", any name with a word such as key, token, secret, password,
// pwd, pass, sig, auth, session...) and for credential query parameters
// (pairs after a ';' separator included) or the userinfo (user name and
// password) of [Config.BaseURL], anywhere in an error's chain: the *url.Error of a failed connection is rebuilt
// with the URL redacted (errors.As still finds it, and net.Error and
// errors.Is(err, syscall.ECONNREFUSED) still hold). [Client.BaseURL]
// returns the URL redacted too.
package openai
