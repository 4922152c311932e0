package llmtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/valetkit/valet/llm"
)

// anthropicRequest is a decoded Messages API request.
type anthropicRequest struct {
	Model      string             `json:"model"`
	MaxTokens  *int               `json:"max_tokens"`
	System     json.RawMessage    `json:"system"`
	Messages   []anthropicMessage `json:"messages"`
	Tools      []anthropicTool    `json:"tools"`
	ToolChoice *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tool_choice"`
	Temperature *float64 `json:"temperature"`
	Stream      bool     `json:"stream"`

	system []anthropicBlock
	req    llm.Request
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	blocks  []anthropicBlock
}

type anthropicBlock struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ID           string          `json:"id,omitempty"`
	Name         string          `json:"name,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	ToolUseID    string          `json:"tool_use_id,omitempty"`
	Content      json.RawMessage `json:"content,omitempty"`
	IsError      bool            `json:"is_error,omitempty"`
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control,omitempty"`
}

type anthropicTool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl *struct {
		Type string `json:"type"`
	} `json:"cache_control"`
}

// blocksOf reads content given as a string or as an array of blocks.
func blocksOf(raw json.RawMessage) ([]anthropicBlock, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []anthropicBlock{{Type: "text", Text: s}}, nil
	}
	var bs []anthropicBlock
	err := json.Unmarshal(raw, &bs)
	return bs, err
}

// toolResultText is the content of a tool_result: a string or text blocks.
func toolResultText(raw json.RawMessage) string {
	bs, err := blocksOf(raw)
	if err != nil {
		return string(raw)
	}
	var sb strings.Builder
	for _, b := range bs {
		sb.WriteString(b.Text)
	}
	return sb.String()
}

// decodeAnthropic decodes and checks a request body; it returns what it
// could decode with the first rule the request breaks.
func decodeAnthropic(body []byte) (*anthropicRequest, *anthropicError) {
	var d anthropicRequest
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, badRequest("There was an error parsing the body of your request: " + err.Error())
	}
	bad := d.check()
	return &d, bad
}

func (d *anthropicRequest) check() *anthropicError {
	var err error
	if d.system, err = blocksOf(d.System); err != nil {
		return badRequest("system: " + err.Error())
	}
	for i := range d.Messages {
		if d.Messages[i].blocks, err = blocksOf(d.Messages[i].Content); err != nil {
			return badRequest(fmt.Sprintf("messages.%d.content: %v", i, err))
		}
	}
	d.req = llm.Request{Model: d.Model, Temperature: d.Temperature}
	if d.MaxTokens != nil {
		d.req.MaxTokens = *d.MaxTokens
	}
	for _, b := range d.system {
		d.req.Messages = append(d.req.Messages, llm.SystemMessage(b.Text))
	}
	for _, t := range d.Tools {
		d.req.Tools = append(d.req.Tools, llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
	}
	if d.ToolChoice != nil {
		switch d.ToolChoice.Type {
		case "auto":
		case "none":
			d.req.ToolChoice = llm.ToolChoiceNone
		case "any":
			d.req.ToolChoice = llm.ToolChoiceRequired
		case "tool":
			d.req.ToolChoice = llm.ToolChoice(d.ToolChoice.Name)
		}
	}
	// Decode every message first, so that Requests shows what came.
	names := map[string]string{}
	for _, m := range d.Messages {
		switch m.Role {
		case "user":
			for _, b := range m.blocks {
				switch b.Type {
				case "text":
					d.req.Messages = append(d.req.Messages, llm.UserMessage(b.Text))
				case "tool_result":
					d.req.Messages = append(d.req.Messages, llm.Message{Role: llm.RoleTool, ToolCallID: b.ToolUseID,
						Name: names[b.ToolUseID], Content: toolResultText(b.Content), IsError: b.IsError})
				}
			}
		case "assistant":
			am := llm.Message{Role: llm.RoleAssistant}
			for _, b := range m.blocks {
				switch b.Type {
				case "text":
					am.Content += b.Text
				case "tool_use":
					names[b.ID] = b.Name
					am.ToolCalls = append(am.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
				}
			}
			d.req.Messages = append(d.req.Messages, am)
		}
	}

	switch {
	case d.Model == "":
		return badRequest("model: Field required")
	case d.MaxTokens == nil:
		return badRequest("max_tokens: Field required")
	case *d.MaxTokens < 1:
		return badRequest("max_tokens: Input should be greater than or equal to 1")
	case len(d.Messages) == 0:
		return badRequest("messages: at least one message is required")
	}
	for i, b := range d.system {
		if b.Type != "text" || b.Text == "" {
			return badRequest(fmt.Sprintf("system.%d: text content blocks must be non-empty", i))
		}
	}
	breakpoints := 0
	count := func(cc *struct {
		Type string `json:"type"`
	}, where string) *anthropicError {
		if cc == nil {
			return nil
		}
		if cc.Type != "ephemeral" {
			return badRequest(where + ".cache_control.type: Input should be 'ephemeral'")
		}
		breakpoints++
		return nil
	}
	tools := map[string]bool{}
	for i, t := range d.Tools {
		if t.Name == "" {
			return badRequest(fmt.Sprintf("tools.%d.name: Field required", i))
		}
		if tools[t.Name] {
			return badRequest("tools: Tool names must be unique.")
		}
		tools[t.Name] = true
		if s := bytes.TrimSpace(t.InputSchema); len(s) == 0 || s[0] != '{' {
			return badRequest(fmt.Sprintf("tools.%d.input_schema: Input should be a valid dictionary", i))
		}
		if e := count(t.CacheControl, fmt.Sprintf("tools.%d", i)); e != nil {
			return e
		}
	}
	for i, b := range d.system {
		if e := count(b.CacheControl, fmt.Sprintf("system.%d", i)); e != nil {
			return e
		}
	}
	if tc := d.ToolChoice; tc != nil && tc.Type == "tool" && !tools[tc.Name] {
		return badRequest(fmt.Sprintf("tool_choice.name: tool %q not found in tools", tc.Name))
	}
	var pending []string // tool_use ids of the previous assistant message
	for i, m := range d.Messages {
		switch {
		case m.Role != "user" && m.Role != "assistant":
			return badRequest(fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		case i == 0 && m.Role != "user":
			return badRequest("messages: first message must use the \"user\" role")
		case i > 0 && d.Messages[i-1].Role == m.Role:
			return badRequest(fmt.Sprintf("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role))
		case len(m.blocks) == 0:
			return badRequest(fmt.Sprintf("messages.%d: all messages must have non-empty content", i))
		}
		answered := map[string]bool{}
		results := true // still in the leading tool_result blocks
		for j, b := range m.blocks {
			where := fmt.Sprintf("messages.%d.content.%d", i, j)
			if e := count(b.CacheControl, where); e != nil {
				return e
			}
			switch b.Type {
			case "text":
				results = false
				if b.Text == "" {
					return badRequest(where + ": text content blocks must be non-empty")
				}
			case "tool_use":
				if m.Role != "assistant" {
					return badRequest(where + ": tool_use blocks may only appear in assistant messages")
				}
				if s := bytes.TrimSpace(b.Input); len(s) == 0 || s[0] != '{' {
					return badRequest(where + ".input: Input should be a valid dictionary")
				}
			case "tool_result":
				if m.Role != "user" {
					return badRequest(where + ": tool_result blocks may only appear in user messages")
				}
				if !results {
					return badRequest(fmt.Sprintf("messages.%d: tool_result blocks must come first in the content of a user message, before any other content", i))
				}
				if !contains(pending, b.ToolUseID) || answered[b.ToolUseID] {
					return badRequest(fmt.Sprintf("%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", where, b.ToolUseID))
				}
				answered[b.ToolUseID] = true
			default:
				results = false
			}
		}
		if m.Role == "user" {
			var missing []string
			for _, id := range pending {
				if !answered[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				return badRequest(fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i-1, strings.Join(missing, ", ")))
			}
			pending = nil
			continue
		}
		pending = pending[:0]
		for _, b := range m.blocks {
			if b.Type == "tool_use" {
				if contains(pending, b.ID) {
					return badRequest(fmt.Sprintf("messages.%d: `tool_use` ids must be unique", i))
				}
				pending = append(pending, b.ID)
			}
		}
	}
	if len(pending) > 0 {
		return badRequest(fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", len(d.Messages)-1, strings.Join(pending, ", ")))
	}
	if breakpoints > AnthropicMaxCacheBreakpoints {
		return badRequest(fmt.Sprintf("A maximum of %d blocks with cache_control may be provided. Found %d.", AnthropicMaxCacheBreakpoints, breakpoints))
	}
	return nil
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// cacheLookback is how many blocks before a breakpoint the API looks for a
// cached prefix.
const cacheLookback = 20

// promptUsage is the caching accounting of one request.
type promptUsage struct {
	total, read, write int
	writes             []string // cache keys to store when the request is served
}

// usage walks the prompt's blocks (tools, system, messages), hashing the
// prefix up to each, and works out what is read from and written to the
// cache of key and the request's model.
func (d *anthropicRequest) usage(s *AnthropicServer, key string) promptUsage {
	type point struct {
		hash   string
		tokens int // of the prefix up to and including the block
		marked bool
	}
	var points []point
	h := sha256.New()
	tokens := 0
	addBlock := func(role string, v any, marked bool) {
		b, _ := json.Marshal(v)
		h.Write([]byte(role))
		h.Write(b)
		tokens += (len(b) + 3) / 4
		marked = marked && tokens >= s.opts.minCacheTokens
		points = append(points, point{hash: hex.EncodeToString(h.Sum(nil)), tokens: tokens, marked: marked})
	}
	for _, t := range d.Tools {
		addBlock("tool", []any{t.Name, t.Description, t.InputSchema}, t.CacheControl != nil)
	}
	for _, b := range d.system {
		addBlock("system", b.Text, b.CacheControl != nil)
	}
	for _, m := range d.Messages {
		for _, b := range m.blocks {
			cc := b.CacheControl
			b.CacheControl = nil
			addBlock(m.Role, b, cc != nil)
		}
	}
	u := promptUsage{total: tokens}
	prefix := key + "\x00" + d.Model + "\x00"
	s.mu.Lock()
	defer s.mu.Unlock()
	readAt, lastMark := -1, -1
	for i, p := range points {
		if !p.marked {
			continue
		}
		lastMark = i
		for j := i; j >= 0 && j > i-cacheLookback; j-- {
			if s.cache[prefix+points[j].hash] {
				readAt = max(readAt, j)
				break
			}
		}
	}
	if readAt >= 0 {
		u.read = points[readAt].tokens
	}
	if lastMark > readAt {
		u.write = points[lastMark].tokens - u.read
	}
	for _, p := range points {
		if p.marked {
			u.writes = append(u.writes, prefix+p.hash)
		}
	}
	return u
}

// commit stores the prefixes the request wrote.
func (u promptUsage) commit(s *AnthropicServer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range u.writes {
		s.cache[k] = true
	}
}

// anthropicOut is a reply in the Messages API's format.
type anthropicOut struct {
	ID           string              `json:"id"`
	Type         string              `json:"type"`
	Role         string              `json:"role"`
	Model        string              `json:"model"`
	Content      []anthropicOutBlock `json:"content"`
	StopReason   *string             `json:"stop_reason"`
	StopSequence *string             `json:"stop_sequence"`
	Usage        anthropicUsage      `json:"usage"`
}

type anthropicOutBlock struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
}

func newAnthropicMessage(d *anthropicRequest, resp *llm.Response, seq int, u promptUsage) anthropicOut {
	out := anthropicOut{ID: fmt.Sprintf("msg_llmtest%06d", seq), Type: "message", Role: "assistant", Model: d.Model}
	if t := resp.Message.Content; t != "" {
		out.Content = append(out.Content, anthropicOutBlock{Type: "text", Text: &t})
	}
	for i, tc := range resp.Message.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("toolu_llmtest%06d_%d", seq, i)
		}
		args := bytes.TrimSpace(tc.Arguments)
		if len(args) == 0 || string(args) == "null" {
			args = []byte("{}")
		}
		out.Content = append(out.Content, anthropicOutBlock{Type: "tool_use", ID: id, Name: tc.Name, Input: args})
	}
	stop := "end_turn"
	if len(resp.Message.ToolCalls) > 0 {
		stop = "tool_use"
	}
	out.StopReason = &stop
	outTokens := resp.Usage.OutputTokens
	if outTokens == 0 {
		b, _ := json.Marshal(out.Content)
		outTokens = (len(b) + 3) / 4
	}
	out.Usage = anthropicUsage{InputTokens: u.total - u.read - u.write, CacheCreationInputTokens: u.write,
		CacheReadInputTokens: u.read, OutputTokens: outTokens}
	return out
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string
	data any
}

// events is the reply as a stream: message_start, ping, each block (text
// word by word, tool input in pieces), message_delta, message_stop.
func (o anthropicOut) events() []sseEvent {
	start := o
	start.Content = []anthropicOutBlock{}
	start.StopReason = nil
	start.Usage.OutputTokens = 1
	evs := []sseEvent{
		{"message_start", map[string]any{"type": "message_start", "message": start}},
		{"ping", map[string]any{"type": "ping"}},
	}
	for i, b := range o.Content {
		switch b.Type {
		case "text":
			empty := ""
			evs = append(evs, sseEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": anthropicOutBlock{Type: "text", Text: &empty}}})
			for _, w := range splitWords(*b.Text) {
				evs = append(evs, sseEvent{"content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "text_delta", "text": w}}})
			}
		case "tool_use":
			evs = append(evs, sseEvent{"content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": anthropicOutBlock{Type: "tool_use", ID: b.ID, Name: b.Name, Input: json.RawMessage("{}")}}})
			in := string(b.Input)
			for _, part := range []string{in[:len(in)/3], in[len(in)/3 : 2*len(in)/3], in[2*len(in)/3:]} {
				evs = append(evs, sseEvent{"content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "input_json_delta", "partial_json": part}}})
			}
		}
		evs = append(evs, sseEvent{"content_block_stop", map[string]any{"type": "content_block_stop", "index": i}})
	}
	evs = append(evs,
		sseEvent{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": o.StopReason, "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": o.Usage.OutputTokens}}},
		sseEvent{"message_stop", map[string]any{"type": "message_stop"}},
	)
	return evs
}
