package llm

import (
	"context"
	"encoding/json"
	"iter"
)

// Role says who wrote a [Message].
type Role string

// The roles of a chat conversation.
const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation.
//
// An assistant message may carry ToolCalls (and text beside them); a tool
// message answers one of those calls through ToolCallID, names the tool in
// Name, and sets IsError when the content reports a failure.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	IsError    bool       `json:"is_error,omitempty"`
}

// ToolCall is the model's request to run one tool. Arguments is always a JSON
// object (backends normalise servers that send something else).
type ToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// ToolSpec describes a tool to the model. Parameters is a JSON Schema for an
// object.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// ToolChoice tells the model whether it may, must or must not call tools.
// Any value other than the constants below is the name of the one tool the
// model must call.
type ToolChoice string

// Tool choices understood by every backend.
const (
	ToolChoiceAuto     ToolChoice = ""         // the model decides (default)
	ToolChoiceNone     ToolChoice = "none"     // no tool calls
	ToolChoiceRequired ToolChoice = "required" // at least one tool call
)

// Request is one call to the model.
type Request struct {
	Messages   []Message
	Tools      []ToolSpec
	ToolChoice ToolChoice
	// Model overrides the backend's configured model when non-empty.
	Model string
	// Temperature is passed through when non-nil.
	Temperature *float64
	// MaxTokens caps the reply when positive.
	MaxTokens int
	// Purpose says what the call is for (the orchestrator sets it on every
	// call it makes). Clients do not send it to the model; it is for test
	// doubles and observability. See [Purpose].
	Purpose Purpose
}

// Usage counts the tokens of one or more model calls, input and output
// apart, as a model reports them (Response.Usage). It is not a run's
// spending: budget.Consumed (agent.Consumed, trigger.Usage) measures a
// whole run — tokens, dollars, wall clock and tool calls — and its Tokens
// is the sum of Usage.Total over the run's model calls.
//
// InputTokens counts every input token, those a provider's prompt cache
// served or stored included; CacheReadTokens and CacheWriteTokens say how
// many of them were read from the cache (billed at a fraction of the
// input price) and written to it (billed at a premium). The input billed
// at the full price is InputTokens - CacheReadTokens - CacheWriteTokens
// (Usage.Uncached). A backend without prompt caching leaves both at 0.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CacheReadTokens is the part of InputTokens read from the provider's
	// prompt cache (Anthropic's cache_read_input_tokens). Default 0.
	CacheReadTokens int `json:"cache_read_tokens,omitempty"`
	// CacheWriteTokens is the part of InputTokens written to the provider's
	// prompt cache (Anthropic's cache_creation_input_tokens). Default 0.
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
}

// Total returns InputTokens + OutputTokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Uncached returns the input tokens neither read from nor written to a
// prompt cache: those billed at the full input price.
func (u Usage) Uncached() int { return u.InputTokens - u.CacheReadTokens - u.CacheWriteTokens }

// Add returns the sum of u and o.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:      u.InputTokens + o.InputTokens,
		OutputTokens:     u.OutputTokens + o.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + o.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + o.CacheWriteTokens,
	}
}

// Response is the model's complete reply. Message has RoleAssistant.
type Response struct {
	Message      Message
	FinishReason string
	Usage        Usage
	Model        string
}

// Chunk is one piece of a streamed reply. Text chunks arrive as the model
// writes; the last chunk of a successful stream carries the whole assembled
// Response (text, tool calls and usage) and no Text.
type Chunk struct {
	Text     string
	Response *Response
}

// Client is a chat model with function calling. Implementations must be safe
// for concurrent use and must honour ctx cancellation.
//
// Stream yields text chunks, then one final chunk whose Response is set. An
// error ends the sequence; a caller may stop ranging early, which releases
// the underlying connection.
//
// req.Messages belongs to the caller, like the p of io.Writer.Write: a Client
// must not modify it, nor keep it after the call returns (the orchestrator
// reuses its buffer from one call to the next). A Client or a wrapper that
// records requests copies what it keeps.
type Client interface {
	Complete(ctx context.Context, req Request) (*Response, error)
	Stream(ctx context.Context, req Request) iter.Seq2[Chunk, error]
}

// Collect drains a stream and returns its final Response.
func Collect(seq iter.Seq2[Chunk, error]) (*Response, error) {
	var final *Response
	for c, err := range seq {
		if err != nil {
			return nil, err
		}
		if c.Response != nil {
			final = c.Response
		}
	}
	if final == nil {
		return nil, &Error{Kind: KindUnavailable, Message: "stream ended without a final response"}
	}
	return final, nil
}

// SystemMessage returns a system message.
func SystemMessage(text string) Message { return Message{Role: RoleSystem, Content: text} }

// UserMessage returns a user message.
func UserMessage(text string) Message { return Message{Role: RoleUser, Content: text} }

// AssistantMessage returns an assistant message with text and optional tool calls.
func AssistantMessage(text string, calls ...ToolCall) Message {
	return Message{Role: RoleAssistant, Content: text, ToolCalls: calls}
}

// ToolResultMessage returns the tool message answering call.
func ToolResultMessage(call ToolCall, content string, isError bool) Message {
	return Message{Role: RoleTool, ToolCallID: call.ID, Name: call.Name, Content: content, IsError: isError}
}
