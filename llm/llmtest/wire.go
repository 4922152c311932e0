package llmtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/valetkit/valet/llm"
)

// The OpenAI Chat Completions wire format, request side. Fields the fake does
// not use are ignored, as lenient OpenAI-compatible servers do.

type wireRequest struct {
	Model               *string            `json:"model"`
	Messages            []wireMessage      `json:"messages"`
	Tools               []wireTool         `json:"tools"`
	ToolChoice          json.RawMessage    `json:"tool_choice"`
	Stream              *bool              `json:"stream"`
	StreamOptions       *wireStreamOptions `json:"stream_options"`
	Temperature         *float64           `json:"temperature"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []wireToolCall  `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
	Name       string          `json:"name"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type wireTool struct {
	Type     string        `json:"type"`
	Function *wireFunction `json:"function"`
}

type wireFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type wireContentPart struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Refusal string `json:"refusal"`
}

// decodedRequest is a request body turned into an llm.Request.
type decodedRequest struct {
	req          llm.Request
	stream       bool
	includeUsage bool
}

var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

const invalidJSONMessage = "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. If you have trouble figuring out how to fix this, please contact us through our help center at help.openai.com.)"

// decodeRequest decodes and validates a Chat Completions request body. It
// returns as much of the request as it could decode even when it also
// returns an error, so that [Server.Requests] can show it.
func decodeRequest(body []byte) (decodedRequest, *apiError) {
	var d decodedRequest
	var w wireRequest
	if err := json.Unmarshal(body, &w); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "body"
			}
			return d, invalid(field, "invalid_type", fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", field, jsonKind(te.Type.Kind().String()), te.Value))
		}
		return d, invalid("", "", invalidJSONMessage)
	}
	d.stream = w.Stream != nil && *w.Stream
	d.includeUsage = w.StreamOptions != nil && w.StreamOptions.IncludeUsage
	if w.Model != nil {
		d.req.Model = *w.Model
	}
	d.req.Temperature = w.Temperature
	switch {
	case w.MaxCompletionTokens != nil:
		d.req.MaxTokens = *w.MaxCompletionTokens
	case w.MaxTokens != nil:
		d.req.MaxTokens = *w.MaxTokens
	}

	// Convert what can be converted first, then validate in OpenAI's order.
	var convErr *apiError
	keep := func(e *apiError) {
		if convErr == nil {
			convErr = e
		}
	}
	for i, wm := range w.Messages {
		m, e := wm.message(i)
		if e != nil {
			keep(e)
		}
		d.req.Messages = append(d.req.Messages, m)
	}
	for i, wt := range w.Tools {
		if wt.Function == nil {
			keep(invalid(fmt.Sprintf("tools[%d].function", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'tools[%d].function'.", i)))
			continue
		}
		d.req.Tools = append(d.req.Tools, llm.ToolSpec{Name: wt.Function.Name, Description: wt.Function.Description, Parameters: wt.Function.Parameters})
		if wt.Type != "" && wt.Type != "function" {
			keep(invalid(fmt.Sprintf("tools[%d].type", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", wt.Type)))
		}
		if !toolNamePattern.MatchString(wt.Function.Name) || len(wt.Function.Name) > 64 {
			keep(invalid(fmt.Sprintf("tools[%d].function.name", i), "invalid_value", fmt.Sprintf("Invalid 'tools[%d].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.", i)))
		}
	}
	choice, e := decodeToolChoice(w.ToolChoice)
	d.req.ToolChoice = choice
	d.req.Purpose = forcedPurpose(choice)
	if e != nil {
		keep(e)
	}

	switch {
	case w.Model == nil || *w.Model == "":
		return d, invalid("", "", "you must provide a model parameter")
	case w.Messages == nil:
		return d, invalid("messages", "missing_required_parameter", "Missing required parameter: 'messages'.")
	case len(w.Messages) == 0:
		return d, invalid("messages", "empty_array", "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.")
	case convErr != nil:
		return d, convErr
	case w.Temperature != nil && (*w.Temperature < 0 || *w.Temperature > 2):
		return d, invalid("temperature", "decimal_above_max_value", fmt.Sprintf("Invalid 'temperature': decimal out of range. Expected a value between 0 and 2, but got %v instead.", *w.Temperature))
	case w.StreamOptions != nil && !d.stream:
		return d, invalid("stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	case len(w.ToolChoice) > 0 && string(w.ToolChoice) != "null" && len(w.Tools) == 0:
		return d, invalid("tool_choice", "", "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
	}
	if n := string(choice); choice != llm.ToolChoiceAuto && choice != llm.ToolChoiceNone && choice != llm.ToolChoiceRequired {
		found := false
		for _, t := range d.req.Tools {
			found = found || t.Name == n
		}
		if !found {
			return d, invalid("tool_choice", "", fmt.Sprintf("Tool choice '%s' not found in 'tools' parameter.", n))
		}
	}
	if e := pairingError(d.req.Messages); e != nil {
		return d, e
	}
	return d, nil
}

// message converts the i-th wire message.
func (wm wireMessage) message(i int) (llm.Message, *apiError) {
	m := llm.Message{Role: llm.Role(wm.Role), Name: wm.Name}
	if wm.ToolCallID != nil {
		m.ToolCallID = *wm.ToolCallID
	}
	var first *apiError
	keep := func(e *apiError) {
		if first == nil {
			first = e
		}
	}
	switch wm.Role {
	case "system", "user", "assistant", "tool", "function":
	case "developer":
		m.Role = llm.RoleSystem
	case "":
		keep(invalid(fmt.Sprintf("messages[%d].role", i), "missing_required_parameter", fmt.Sprintf("Missing required parameter: 'messages[%d].role'.", i)))
	default:
		keep(invalid(fmt.Sprintf("messages[%d].role", i), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", wm.Role)))
	}
	text, e := decodeContent(wm.Content, i)
	m.Content = text
	if e != nil {
		keep(e)
	}
	if wm.Role == "tool" && wm.ToolCallID == nil {
		keep(invalid(fmt.Sprintf("messages[%d].tool_call_id", i), "missing_required_parameter", fmt.Sprintf("Missing parameter 'tool_call_id': messages with role 'tool' must have a 'tool_call_id'. (messages[%d])", i)))
	}
	for j, wc := range wm.ToolCalls {
		args, e := decodeArguments(wc.Function.Arguments, i, j)
		if e != nil {
			keep(e)
		}
		m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: wc.ID, Name: wc.Function.Name, Arguments: args})
		if wc.Type != "" && wc.Type != "function" {
			keep(invalid(fmt.Sprintf("messages[%d].tool_calls[%d].type", i, j), "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", wc.Type)))
		}
	}
	if len(wm.ToolCalls) > 0 && wm.Role != "assistant" {
		keep(invalid(fmt.Sprintf("messages[%d].tool_calls", i), "", fmt.Sprintf("Invalid parameter: only messages with role 'assistant' can have 'tool_calls'. (messages[%d])", i)))
	}
	return m, first
}

// decodeContent accepts a string, null, or an array of content parts.
func decodeContent(raw json.RawMessage, i int) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid("", "", invalidJSONMessage)
		}
		return s, nil
	case '[':
		var parts []wireContentPart
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", invalid(fmt.Sprintf("messages[%d].content", i), "invalid_type", fmt.Sprintf("Invalid type for 'messages[%d].content': expected one of a string or array of objects, but got an array of other values instead.", i))
		}
		var texts []string
		for _, p := range parts {
			switch p.Type {
			case "text":
				texts = append(texts, p.Text)
			case "refusal":
				texts = append(texts, p.Refusal)
			}
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", invalid(fmt.Sprintf("messages[%d].content", i), "invalid_type", fmt.Sprintf("Invalid type for 'messages[%d].content': expected one of a string or array of objects, but got %s instead.", i, rawKind(raw)))
}

// decodeArguments requires a JSON string, as OpenAI does, and returns its
// text as JSON (an empty string becomes {}; text that is not JSON becomes a
// JSON string so that the result is always valid JSON).
func decodeArguments(raw json.RawMessage, i, j int) (json.RawMessage, *apiError) {
	raw = bytes.TrimSpace(raw)
	param := fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`{}`), invalid(param, "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s'.", param))
	}
	if raw[0] != '"' {
		var args json.RawMessage
		if json.Valid(raw) {
			args = append(args, raw...)
		} else {
			args = json.RawMessage(`{}`)
		}
		return args, invalid(param, "invalid_type", fmt.Sprintf("Invalid type for '%s': expected a string, but got %s instead.", param, rawKind(raw)))
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return json.RawMessage(`{}`), invalid("", "", invalidJSONMessage)
	}
	switch {
	case strings.TrimSpace(s) == "":
		return json.RawMessage(`{}`), nil
	case json.Valid([]byte(s)):
		return json.RawMessage(s), nil
	}
	return append(json.RawMessage(nil), raw...), nil
}

// decodeToolChoice accepts "auto", "none", "required" or
// {"type":"function","function":{"name":...}}.
func decodeToolChoice(raw json.RawMessage) (llm.ToolChoice, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return llm.ToolChoiceAuto, nil
	}
	if raw[0] == '"' {
		var s string
		_ = json.Unmarshal(raw, &s)
		switch s {
		case "auto":
			return llm.ToolChoiceAuto, nil
		case "none":
			return llm.ToolChoiceNone, nil
		case "required":
			return llm.ToolChoiceRequired, nil
		}
		return llm.ToolChoiceAuto, invalid("tool_choice", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s))
	}
	var obj struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if raw[0] != '{' || json.Unmarshal(raw, &obj) != nil {
		return llm.ToolChoiceAuto, invalid("tool_choice", "invalid_type", fmt.Sprintf("Invalid type for 'tool_choice': expected one of a string or an object, but got %s instead.", rawKind(raw)))
	}
	if obj.Type != "function" {
		return llm.ToolChoiceAuto, invalid("tool_choice.type", "invalid_value", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function'.", obj.Type))
	}
	if obj.Function == nil || obj.Function.Name == "" {
		return llm.ToolChoiceAuto, invalid("tool_choice.function.name", "missing_required_parameter", "Missing required parameter: 'tool_choice.function.name'.")
	}
	return llm.ToolChoice(obj.Function.Name), nil
}

// pairingError checks the tool-call pairing invariant with [llm.CheckPairing]
// and, when it is broken, words the failure the way OpenAI does.
func pairingError(msgs []llm.Message) *apiError {
	err := llm.CheckPairing(msgs)
	if err == nil {
		return nil
	}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		param := fmt.Sprintf("messages.[%d].role", i)
		if m.Role == llm.RoleTool {
			return invalid(param, "", "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.")
		}
		if m.Role != llm.RoleAssistant || len(m.ToolCalls) == 0 {
			continue
		}
		open := make(map[string]bool, len(m.ToolCalls))
		for _, c := range m.ToolCalls {
			if open[c.ID] {
				return invalid(fmt.Sprintf("messages.[%d].tool_calls", i), "", fmt.Sprintf("Invalid parameter: duplicate 'id' of '%s' in 'tool_calls'.", c.ID))
			}
			open[c.ID] = true
		}
		answered := make(map[string]bool, len(m.ToolCalls))
		j := i + 1
		for ; j < len(msgs) && msgs[j].Role == llm.RoleTool; j++ {
			id := msgs[j].ToolCallID
			switch {
			case answered[id]:
				return invalid(fmt.Sprintf("messages.[%d].tool_call_id", j), "", fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' has already been answered by a previous tool message.", id))
			case !open[id]:
				return invalid(fmt.Sprintf("messages.[%d].tool_call_id", j), "", fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", id))
			}
			answered[id] = true
		}
		var missing []string
		for _, c := range m.ToolCalls {
			if !answered[c.ID] {
				missing = append(missing, c.ID)
			}
		}
		if len(missing) > 0 {
			return invalid(param, "", "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(missing, ", "))
		}
		i = j - 1
	}
	// CheckPairing found something the scan above does not word; report it
	// as it is.
	return invalid("messages", "", strings.TrimPrefix(err.Error(), "llm: "))
}

// jsonKind names a Go kind the way OpenAI names JSON types.
func jsonKind(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map", "ptr":
		return "an object"
	case "float64", "float32":
		return "a decimal"
	case "int", "int64", "int32":
		return "an integer"
	}
	return kind
}

// rawKind names the JSON type of raw, e.g. "an object".
func rawKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// splitRunes cuts s into at most n non-empty pieces of about equal length,
// never inside a UTF-8 sequence.
func splitRunes(s string, n int) []string {
	count := utf8.RuneCountInString(s)
	if n > count {
		n = count
	}
	if n <= 1 {
		if s == "" {
			return nil
		}
		return []string{s}
	}
	pieces := make([]string, 0, n)
	per := count / n
	for k := 0; k < n-1; k++ {
		cut := 0
		for r := 0; r < per; r++ {
			_, size := utf8.DecodeRuneInString(s[cut:])
			cut += size
		}
		pieces = append(pieces, s[:cut])
		s = s[cut:]
	}
	return append(pieces, s)
}

// splitWords cuts text into the content deltas of a stream: one piece per
// word, the space before a word kept with it (" world"), as tokenizers do. A
// single word is cut in two so that even short texts arrive in several
// deltas.
func splitWords(text string) []string {
	var pieces []string
	rest := text
	for rest != "" {
		i := strings.IndexByte(rest[min(1, len(rest)):], ' ')
		piece := rest
		if i >= 0 {
			piece = rest[:i+1]
		}
		pieces = append(pieces, piece)
		rest = rest[len(piece):]
	}
	if len(pieces) == 1 {
		return splitRunes(text, 2)
	}
	return pieces
}
