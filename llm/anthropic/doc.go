// Package anthropic is the llm.Client for Anthropic's Messages API (Claude),
// built on the official SDK, github.com/anthropics/anthropic-sdk-go. Only this
// package imports the SDK: a program that does not use Claude does not
// compile it.
//
//	c := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", APIKey: key})
//	c, err := anthropic.FromEnv() // ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL, ANTHROPIC_MODEL
//
//	resp, err := c.Complete(ctx, llm.Request{Messages: msgs, Tools: specs})
//	for chunk, err := range c.Stream(ctx, req) { ... } // text chunks, then chunk.Response
//
// New reads no environment variables and no credential files (unlike the
// SDK's anthropic.NewClient); the SDK's own retries are off, since the agent
// loop retries by error kind. Config prints and logs its key as REDACTED,
// and the key never appears in an error.
//
// # Conversations
//
// An llm.Request becomes a Messages API request this way:
//
//   - the system messages at the start are the system blocks; a system
//     message later in the conversation (a note the agent loop adds) becomes
//     a text block of a user turn, so the prefix before it stays cached;
//   - messages of the same role in a row make one turn, as the API requires
//     roles to alternate: the tool results answering one assistant turn's
//     parallel tool calls go back together, as the tool_result blocks of one
//     user turn, in the order of the calls (llm.Message.IsError is the
//     block's is_error);
//   - an assistant message's text and tool calls are its text and tool_use
//     blocks; llm.ToolSpec.Parameters is the tool's input_schema;
//   - llm.ToolChoiceRequired is {"type":"any"}, llm.ToolChoiceNone
//     {"type":"none"}, a tool name {"type":"tool","name":...};
//   - max_tokens, which the API requires, is llm.Request.MaxTokens, or
//     Config.MaxTokens, or DefaultMaxTokens.
//
// Replies become an llm.Response whose Message holds the text blocks joined
// and one llm.ToolCall per tool_use block (id, name, input as Arguments);
// thinking blocks are left out. FinishReason uses the names llm/openai
// reports: end_turn → "stop", tool_use → "tool_calls", max_tokens →
// "length", refusal → "content_filter".
//
// # Prompt caching
//
// Caching is on unless Config.DisableCaching is set. Each request carries
// cache_control breakpoints — at most MaxCacheBreakpoints (4), the API's
// limit — on the last tool, on the last system block, on the last block of
// the user turn the previous call of the loop ended with (the newest stable
// part of the history) and on the last block of the conversation. The
// prefix up to each is cached for five minutes, so an agent loop, which
// sends the same system prompt, tools and growing history on every turn,
// reads all but the newest turn from the cache at a tenth of the input
// price (writing costs 1.25 times the input price, once).
//
// llm.Usage reports it: InputTokens counts all the input (Anthropic's
// input_tokens plus the cached parts), CacheReadTokens and
// CacheWriteTokens the parts read from and written to the cache;
// agent.DefaultPrices prices both for Claude models. On llmtest's fake
// Messages API, a 10-turn loop with a 1,000-token system prompt bills
// 21,845 input tokens at the full price without caching, and none with it
// (3,278 written, 18,567 read): 27% of the input price.
//
// # Streaming
//
// Stream reads the server-sent events itself: text_delta pieces are yielded
// as they arrive, a tool_use block's input_json_delta pieces are assembled
// into its arguments, and the usage of message_start and message_delta is
// merged. A stream that ends before message_stop — inside a tool_use block
// too — is an llm.KindUnavailable error and yields no response, so a tool
// call cut midway never runs; an "error" event is classified like an error
// answer. Breaking out of the range closes the response body.
//
// # Errors
//
// Every failure is an *llm.Error (check it with llm.KindOf, llm.RetryAfter,
// llm.IsRetryable); Code holds Anthropic's error type:
//
//   - overloaded_error (529) → KindUnavailable; api_error and other 5xx too;
//   - rate_limit_error (429) → KindRateLimited, with RetryAfter from the
//     retry-after header;
//   - "prompt is too long: 208310 tokens > 200000 maximum" →
//     KindContextOverflow with ContextUsed 208310 and ContextLimit 200000;
//     request_too_large (413) → KindContextOverflow;
//   - authentication_error (401), permission_error (403), billing_error →
//     KindAuth;
//   - timeout_error, 408, 504 and network timeouts → KindTimeout;
//   - other 4xx (invalid_request_error, not_found_error) → KindBadRequest;
//   - an error answer that is not JSON (a proxy's HTML page) is classified
//     by its status, its Message naming the content type and the page's
//     title;
//   - a cancelled ctx gives an error for which errors.Is(err,
//     context.Canceled) holds.
//
// # Several keys
//
// Several keys (Config.APIKeys beside APIKey) rotate: a call whose key is
// refused for quota, rate limit or auth goes out again at once with the
// next key, and the refused key rests for Config.KeyCooldown. No key is
// ever printed, in errors, String or LogValue.
//
// # Testing
//
// llmtest.NewAnthropicServer is a fake Messages API backed by any
// llm.Client (an llmtest.Script), enforcing the API's rules and accounting
// for the cache as the API does; llmtest.ClientContract is the behaviour
// this client shares with llm/openai.
package anthropic
