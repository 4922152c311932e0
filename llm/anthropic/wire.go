package anthropic

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/valetkit/valet/llm"
)

// The Messages API's request body, written by this package (the SDK sends
// it): cache_control placement is this package's job, and the body is what
// the tests and the fake server read.
type wireRequest struct {
	Model       string          `json:"model"`
	MaxTokens   int             `json:"max_tokens"`
	System      []wireBlock     `json:"system,omitempty"`
	Messages    []wireMessage   `json:"messages"`
	Tools       []wireTool      `json:"tools,omitempty"`
	ToolChoice  *wireToolChoice `json:"tool_choice,omitempty"`
	Temperature *float64        `json:"temperature,omitempty"`
	Stream      bool            `json:"stream,omitempty"`
}

type wireMessage struct {
	Role    string      `json:"role"`
	Content []wireBlock `json:"content"`
}

// wireBlock is a content block: text, tool_use or tool_result.
type wireBlock struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`

	CacheControl *cacheControl `json:"cache_control,omitempty"`
}

type cacheControl struct {
	Type string `json:"type"`
}

var ephemeral = &cacheControl{Type: "ephemeral"}

type wireTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *cacheControl   `json:"cache_control,omitempty"`
}

type wireToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// assistantFirstNote is the user turn put before a conversation that the
// assistant opened, which the Messages API does not accept.
const assistantFirstNote = "(The conversation so far, opened by the assistant.)"

// request maps an llm.Request onto the Messages API.
//
// Leading system messages become the system blocks; a system message later
// in the conversation (a note the agent loop adds) becomes a text block of
// a user turn, so the cached prefix before it is not disturbed. Messages of
// the same role in a row make one turn, so the tool results of one
// assistant turn go back together, as tool_result blocks of one user turn.
func (c *Client) request(req llm.Request, stream bool) (*wireRequest, error) {
	w := &wireRequest{Model: req.Model, MaxTokens: req.MaxTokens, Temperature: req.Temperature, Stream: stream}
	if w.Model == "" {
		w.Model = c.model
	}
	if w.MaxTokens <= 0 {
		w.MaxTokens = c.maxTokens
	}
	leading := true
	add := func(role string, b wireBlock) {
		if n := len(w.Messages); n > 0 && w.Messages[n-1].Role == role {
			w.Messages[n-1].Content = append(w.Messages[n-1].Content, b)
			return
		}
		w.Messages = append(w.Messages, wireMessage{Role: role, Content: []wireBlock{b}})
	}
	for i, m := range req.Messages {
		switch m.Role {
		case llm.RoleSystem:
			if m.Content == "" {
				continue
			}
			if leading {
				w.System = append(w.System, wireBlock{Type: "text", Text: m.Content})
			} else {
				add("user", wireBlock{Type: "text", Text: m.Content})
			}
			continue
		case llm.RoleUser:
			if m.Content != "" {
				add("user", wireBlock{Type: "text", Text: m.Content})
			}
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, &llm.Error{Kind: llm.KindBadRequest, Message: fmt.Sprintf("message %d: tool message without tool_call_id", i)}
			}
			add("user", wireBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError})
		case llm.RoleAssistant:
			if m.Content != "" {
				add("assistant", wireBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				add("assistant", wireBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: trimJSON(tc.Arguments)})
			}
		default:
			return nil, &llm.Error{Kind: llm.KindBadRequest, Message: fmt.Sprintf("message %d: unknown role %q", i, m.Role)}
		}
		leading = false
	}
	if len(w.Messages) > 0 && w.Messages[0].Role == "assistant" {
		// The API wants the user first; a conversation the assistant opened
		// (a task's greeting, a window trimmed past its first user turn)
		// gets a neutral user turn before it.
		w.Messages = append([]wireMessage{{Role: "user", Content: []wireBlock{{Type: "text", Text: assistantFirstNote}}}}, w.Messages...)
	}
	for _, t := range req.Tools {
		schema := trimJSON(t.Parameters)
		if string(schema) == "{}" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if schema[0] != '{' {
			return nil, &llm.Error{Kind: llm.KindBadRequest, Message: fmt.Sprintf("tool %q: parameters are not a JSON object", t.Name)}
		}
		w.Tools = append(w.Tools, wireTool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	switch req.ToolChoice {
	case llm.ToolChoiceAuto:
	case llm.ToolChoiceNone:
		w.ToolChoice = &wireToolChoice{Type: "none"}
	case llm.ToolChoiceRequired:
		w.ToolChoice = &wireToolChoice{Type: "any"}
	default:
		w.ToolChoice = &wireToolChoice{Type: "tool", Name: string(req.ToolChoice)}
	}
	if c.caching {
		w.placeBreakpoints()
	}
	return w, nil
}

// placeBreakpoints marks, in the order the API caches a prompt (tools,
// system, messages), the last tool, the last system block, the last block
// of the user turn before the newest assistant turn (the newest part of the
// history that the previous call ended with, so it is read from the cache)
// and the last block of the conversation (so the next call reads it): at
// most MaxCacheBreakpoints.
func (w *wireRequest) placeBreakpoints() {
	if n := len(w.Tools); n > 0 {
		w.Tools[n-1].CacheControl = ephemeral
	}
	if n := len(w.System); n > 0 {
		w.System[n-1].CacheControl = ephemeral
	}
	last := len(w.Messages) - 1
	if last < 0 {
		return
	}
	mark := func(i int) {
		blocks := w.Messages[i].Content
		blocks[len(blocks)-1].CacheControl = ephemeral
	}
	mark(last)
	// The previous call ended with the user turn before the newest
	// assistant turn.
	for i := last - 1; i > 0; i-- {
		if w.Messages[i].Role == "assistant" {
			if w.Messages[i-1].Role == "user" {
				mark(i - 1)
			}
			break
		}
	}
}

// wireResponse is a Messages API reply (or an error object).
type wireResponse struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Model      string          `json:"model"`
	Content    []wireRespBlock `json:"content"`
	StopReason string          `json:"stop_reason"`
	Usage      wireUsage       `json:"usage"`
}

type wireRespBlock struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type wireUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// usage maps Anthropic's counts, where input_tokens excludes the cached
// parts, onto llm.Usage, where InputTokens includes them.
func (u wireUsage) usage() llm.Usage {
	return llm.Usage{
		InputTokens:      u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens,
		OutputTokens:     u.OutputTokens,
		CacheReadTokens:  u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
	}
}

// finishReason maps Anthropic's stop_reason onto the names llm/openai
// reports: end_turn and stop_sequence → "stop", tool_use → "tool_calls",
// max_tokens → "length", refusal → "content_filter"; others pass through.
func finishReason(s string) string {
	switch s {
	case "end_turn", "stop_sequence":
		return "stop"
	case "tool_use":
		return "tool_calls"
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "refusal":
		return "content_filter"
	}
	return s
}

func (w *wireResponse) response() (*llm.Response, error) {
	msg := llm.Message{Role: llm.RoleAssistant}
	var text strings.Builder
	for _, b := range w.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: trimJSON(b.Input)})
		}
	}
	msg.Content = text.String()
	return &llm.Response{Message: msg, FinishReason: finishReason(w.StopReason), Usage: w.Usage.usage(), Model: w.Model}, nil
}
