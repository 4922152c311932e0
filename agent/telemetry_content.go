package agent

import (
	"encoding/json"

	"github.com/valetkit/valet/llm"
)

// Content capture (TelemetryOptions.CaptureContent) in the GenAI semantic
// conventions' message format: a JSON array of messages, each a role and
// its parts. Every text is masked (maskText) and tool arguments are
// redacted (redactArgs), so no secret reaches an attribute.

type otelMessage struct {
	Role         string     `json:"role"`
	Parts        []otelPart `json:"parts"`
	FinishReason string     `json:"finish_reason,omitempty"`
}

type otelPart struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Response  string          `json:"response,omitempty"`
}

// contentJSON renders msgs, masked, as gen_ai.input.messages or
// gen_ai.output.messages (finish is the output's finish reason).
func contentJSON(msgs []llm.Message, finish string) string {
	out := make([]otelMessage, 0, len(msgs))
	for _, m := range msgs {
		om := otelMessage{Role: string(m.Role), FinishReason: finish}
		switch {
		case m.Role == llm.RoleTool:
			om.Parts = append(om.Parts, otelPart{Type: "tool_call_response", ID: m.ToolCallID, Response: maskText(m.Content)})
		case m.Content != "":
			om.Parts = append(om.Parts, otelPart{Type: "text", Content: maskText(m.Content)})
		}
		for _, c := range m.ToolCalls {
			om.Parts = append(om.Parts, otelPart{Type: "tool_call", ID: c.ID, Name: c.Name, Arguments: argsJSON(c.Arguments)})
		}
		if om.Parts == nil {
			om.Parts = []otelPart{}
		}
		out = append(out, om)
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "[]"
	}
	return string(b)
}

// redactArgs is a tool call's arguments with secrets masked as in
// ToolCallRecord.ArgsSummary (summarizeArgs), without its cut of the whole:
// JSON with secret values replaced by "***" (string values that need
// masking are cut to summaryMaxString, as there); text that is not JSON,
// withheld when it holds a sensitive word.
func redactArgs(raw json.RawMessage) string {
	if cleanArgs(raw) {
		return string(raw)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return rawText(string(raw), len(raw)+1)
	}
	return marshal(redact(v))
}

// argsJSON is redactArgs as JSON: a string when it is not.
func argsJSON(raw json.RawMessage) json.RawMessage {
	s := redactArgs(raw)
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
