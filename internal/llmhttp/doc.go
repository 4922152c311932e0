// Package llmhttp holds the HTTP plumbing the model clients (llm/openai,
// llm/anthropic) share and that is not tied to either provider's SDK:
// reading a reply body up to a cap, cutting an error answer's body at the
// cap before the SDK reads it, and scrubbing credentials out of text that
// goes into an error. It must import neither SDK: CI checks that only
// llm/openai imports openai-go and only llm/anthropic imports
// anthropic-sdk-go.
package llmhttp
