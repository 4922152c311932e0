// Package msgjson is the JSON form in which the history backends
// (pgmemory, sqlitememory) keep a message: one shape for both, so a
// history moved from one to the other reads back the same. Tool-call
// arguments that are not valid JSON are kept as a string, byte for byte.
package msgjson

import (
	"encoding/json"

	"github.com/valetkit/valet/llm"
)

// stored is how a message is kept.
type stored struct {
	Role       llm.Role     `json:"role"`
	Content    string       `json:"content,omitempty"`
	ToolCalls  []storedCall `json:"tool_calls,omitempty"`
	ToolCallID string       `json:"tool_call_id,omitempty"`
	Name       string       `json:"name,omitempty"`
	IsError    bool         `json:"is_error,omitempty"`
}

type storedCall struct {
	ID      string          `json:"id"`
	Name    string          `json:"name"`
	Args    json.RawMessage `json:"arguments,omitempty"`
	RawArgs *string         `json:"arguments_raw,omitempty"`
}

// Encode returns m's stored form.
func Encode(m llm.Message) (string, error) {
	s := stored{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name, IsError: m.IsError}
	for _, c := range m.ToolCalls {
		sc := storedCall{ID: c.ID, Name: c.Name}
		if c.Arguments != nil {
			if json.Valid(c.Arguments) {
				sc.Args = c.Arguments
			} else {
				raw := string(c.Arguments)
				sc.RawArgs = &raw
			}
		}
		s.ToolCalls = append(s.ToolCalls, sc)
	}
	b, err := json.Marshal(s)
	return string(b), err
}

// Decode reads a message from its stored form.
func Decode(b []byte) (llm.Message, error) {
	var s stored
	if err := json.Unmarshal(b, &s); err != nil {
		return llm.Message{}, err
	}
	m := llm.Message{Role: s.Role, Content: s.Content, ToolCallID: s.ToolCallID, Name: s.Name, IsError: s.IsError}
	for _, c := range s.ToolCalls {
		tc := llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: c.Args}
		if c.RawArgs != nil {
			tc.Arguments = json.RawMessage(*c.RawArgs)
		}
		m.ToolCalls = append(m.ToolCalls, tc)
	}
	return m, nil
}
