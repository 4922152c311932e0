package anthropic

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/valetkit/valet/llm"
)

// streamEvent is the data of one server-sent event of a streamed reply.
type streamEvent struct {
	Type         string         `json:"type"`
	Index        int            `json:"index"`
	Message      *wireResponse  `json:"message"`
	ContentBlock *wireRespBlock `json:"content_block"`
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Usage *wireUsage `json:"usage"`
}

// block is a content block being assembled from a stream.
type block struct {
	typ, id, name string
	input         strings.Builder
	done          bool
}

// readStream reads the server-sent events of res and yields text chunks and
// the final response. A body that ends before message_stop is
// KindUnavailable and yields no response, so a tool_use block cut off
// midway never becomes a half tool call.
func (c *Client) readStream(ctx context.Context, res *http.Response, yield func(llm.Chunk, error) bool) {
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), int(min(c.maxBytes, 1<<31-1)))
	var (
		event   string
		data    bytes.Buffer
		blocks  = map[int]*block{}
		order   []int
		text    strings.Builder
		usage   wireUsage
		model   string
		stop    string
		held    int64
		stopped bool
	)
	fail := func(f failure) { yield(llm.Chunk{}, c.classify(ctx, f)) }
	handle := func() bool { // false: the stream is over (or failed)
		defer func() { event = ""; data.Reset() }()
		if data.Len() == 0 {
			return true
		}
		if event == "error" {
			fail(failure{body: bytes.Clone(data.Bytes()), inline: true})
			return false
		}
		var ev streamEvent
		if err := json.Unmarshal(data.Bytes(), &ev); err != nil {
			fail(failure{body: bytes.Clone(data.Bytes()), malformed: true, err: errors.New("anthropic: undecodable stream event")})
			return false
		}
		if ev.Type == "" {
			ev.Type = event
		}
		switch ev.Type {
		case "error":
			fail(failure{body: bytes.Clone(data.Bytes()), inline: true})
			return false
		case "message_start":
			if ev.Message != nil {
				model = ev.Message.Model
				usage = ev.Message.Usage
			}
		case "content_block_start":
			if ev.ContentBlock == nil {
				break
			}
			b := &block{typ: ev.ContentBlock.Type, id: ev.ContentBlock.ID, name: ev.ContentBlock.Name}
			if _, ok := blocks[ev.Index]; !ok {
				order = append(order, ev.Index)
			}
			blocks[ev.Index] = b
			if b.typ == "text" && ev.ContentBlock.Text != "" {
				text.WriteString(ev.ContentBlock.Text)
				if !yield(llm.Chunk{Text: ev.ContentBlock.Text}, nil) {
					return false
				}
			}
		case "content_block_delta":
			b := blocks[ev.Index]
			held += int64(len(ev.Delta.Text) + len(ev.Delta.PartialJSON))
			if held > c.maxBytes {
				fail(failure{err: ErrResponseTooLarge})
				return false
			}
			switch ev.Delta.Type {
			case "text_delta":
				if b != nil && b.typ != "text" {
					break
				}
				text.WriteString(ev.Delta.Text)
				if ev.Delta.Text != "" && !yield(llm.Chunk{Text: ev.Delta.Text}, nil) {
					return false
				}
			case "input_json_delta":
				if b != nil {
					b.input.WriteString(ev.Delta.PartialJSON)
				}
			}
		case "content_block_stop":
			if b := blocks[ev.Index]; b != nil {
				b.done = true
			}
		case "message_delta":
			if ev.Delta.StopReason != "" {
				stop = ev.Delta.StopReason
			}
			if ev.Usage != nil {
				// Output tokens are cumulative; input counts, when repeated,
				// are the final ones.
				usage.OutputTokens = ev.Usage.OutputTokens
				if ev.Usage.InputTokens > 0 {
					usage.InputTokens = ev.Usage.InputTokens
				}
				if ev.Usage.CacheCreationInputTokens > 0 {
					usage.CacheCreationInputTokens = ev.Usage.CacheCreationInputTokens
				}
				if ev.Usage.CacheReadInputTokens > 0 {
					usage.CacheReadInputTokens = ev.Usage.CacheReadInputTokens
				}
			}
		case "message_stop":
			stopped = true
			return false
		}
		return true
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if !handle() {
				if stopped {
					c.finish(ctx, blocks, order, &text, usage, model, stop, yield)
				}
				return
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	err := sc.Err()
	if err == nil && data.Len() > 0 { // a last event without its blank line
		if !handle() {
			if stopped {
				c.finish(ctx, blocks, order, &text, usage, model, stop, yield)
			}
			return
		}
	}
	if errors.Is(err, bufio.ErrTooLong) {
		fail(failure{err: ErrResponseTooLarge})
		return
	}
	if err != nil {
		fail(failure{err: err})
		return
	}
	fail(failure{truncated: true, err: errors.New("anthropic: stream ended before message_stop")})
}

// finish yields the final chunk of a stream that reached message_stop.
func (c *Client) finish(ctx context.Context, blocks map[int]*block, order []int, text *strings.Builder,
	usage wireUsage, model, stop string, yield func(llm.Chunk, error) bool) {
	msg := llm.Message{Role: llm.RoleAssistant, Content: text.String()}
	for _, i := range order {
		b := blocks[i]
		if b.typ != "tool_use" {
			continue
		}
		if !b.done {
			yield(llm.Chunk{}, c.classify(ctx, failure{truncated: true, err: errors.New("anthropic: stream ended inside a tool_use block")}))
			return
		}
		args := json.RawMessage(b.input.String())
		if !json.Valid(trimJSON(args)) {
			yield(llm.Chunk{}, c.classify(ctx, failure{truncated: true, err: errors.New("anthropic: tool_use input in the stream is not valid JSON")}))
			return
		}
		msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: b.id, Name: b.name, Arguments: trimJSON(args)})
	}
	yield(llm.Chunk{Response: &llm.Response{Message: msg, FinishReason: finishReason(stop), Usage: usage.usage(), Model: model}}, nil)
}
