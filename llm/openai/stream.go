package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/valetkit/valet/llm"
)

// readStream reads a streamed reply from res (whose body the caller closes)
// and yields text chunks, then the final chunk, or one error.
//
// The server-sent events are read here rather than by openai-go's ssestream:
// servers compatible with OpenAI end streams in ways ssestream reports as a
// clean end (a connection dropped before "data: [DONE]") or as an
// unstructured error (Groq's "event: error", OpenRouter's "error" object in a
// chunk), and every one of them must become a classified *llm.Error.
func (c *Client) readStream(ctx context.Context, res *http.Response, yield func(llm.Chunk, error) bool) {
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "application/json" {
		// The server ignored "stream": true and sent one whole completion.
		c.readWhole(ctx, res, yield)
		return
	}
	var (
		acc   accumulator
		event string
		data  bytes.Buffer
		br    = bufio.NewReaderSize(res.Body, 64<<10)
	)
	// dispatch handles one complete event; it reports whether to go on.
	dispatch := func() (more bool) {
		defer func() { event = ""; data.Reset() }()
		payload := bytes.TrimSpace(data.Bytes())
		if event == "error" {
			yield(llm.Chunk{}, c.classify(ctx, failure{body: payload, inline: true}))
			return false
		}
		if len(payload) == 0 {
			// No data: nothing to dispatch (the SSE spec), whatever the
			// event's name, e.g. "event: ping" keep-alives.
			return true
		}
		if bytes.Equal(payload, []byte("[DONE]")) {
			yield(llm.Chunk{Response: acc.response()}, nil)
			return false
		}
		var w wireCompletion
		if err := json.Unmarshal(payload, &w); err != nil {
			yield(llm.Chunk{}, c.classify(ctx, failure{body: payload, err: err, malformed: true}))
			return false
		}
		if w.hasError() {
			yield(llm.Chunk{}, c.classify(ctx, failure{body: payload, inline: true}))
			return false
		}
		text := acc.add(&w)
		if acc.err != nil {
			yield(llm.Chunk{}, c.classify(ctx, failure{err: acc.err}))
			return false
		}
		if acc.size > c.maxBytes {
			yield(llm.Chunk{}, c.classify(ctx, failure{err: ErrResponseTooLarge}))
			return false
		}
		if text != "" {
			return yield(llm.Chunk{Text: text}, nil)
		}
		return true
	}
	var line []byte
	for {
		var err error
		line, err = readLine(br, line[:0], c.maxBytes)
		if len(line) > 0 {
			line = bytes.TrimRight(line, "\r\n")
			if !c.sseLine(line, &event, &data) && !dispatch() {
				return
			}
			if int64(data.Len()) > c.maxBytes {
				// One event's data lines together; each line is capped by
				// readLine.
				err = ErrResponseTooLarge
			}
		}
		if err == nil {
			continue
		}
		if !errors.Is(err, io.EOF) {
			yield(llm.Chunk{}, c.classify(ctx, failure{err: err}))
			return
		}
		// The body ended. An unterminated last event still counts.
		if data.Len() > 0 || event != "" {
			if !dispatch() {
				return
			}
		}
		if ctx.Err() != nil {
			yield(llm.Chunk{}, c.classify(ctx, failure{err: ctx.Err()}))
			return
		}
		if acc.finish != "" {
			// No "data: [DONE]", but the model had finished: some servers
			// simply close the stream there.
			yield(llm.Chunk{Response: acc.response()}, nil)
			return
		}
		yield(llm.Chunk{}, c.classify(ctx, failure{err: io.ErrUnexpectedEOF, truncated: true}))
		return
	}
}

// readLine appends to buf the next line of br, with its line ending, and
// returns it. It stops reading and fails with ErrResponseTooLarge once the
// line is longer than limit bytes (plus its line ending).
func readLine(br *bufio.Reader, buf []byte, limit int64) ([]byte, error) {
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if int64(len(buf))-2 > limit { // -2: "\r\n"
			return nil, ErrResponseTooLarge
		}
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}

// sseLine applies one line (without its line ending) to the event being
// built and reports whether the line was anything but the blank line that
// ends an event.
func (c *Client) sseLine(line []byte, event *string, data *bytes.Buffer) bool {
	if len(line) == 0 {
		return false
	}
	if line[0] == ':' {
		return true // a comment, e.g. ": OPENROUTER PROCESSING" keep-alives
	}
	name, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(name) {
	case "data":
		if data.Len() > 0 {
			data.WriteByte('\n')
		}
		data.Write(value)
	case "event":
		*event = string(value)
	}
	return true
}

// readWhole handles a non-SSE answer to a streaming request.
func (c *Client) readWhole(ctx context.Context, res *http.Response, yield func(llm.Chunk, error) bool) {
	body, err := c.readBody(res.Body)
	if err != nil {
		yield(llm.Chunk{}, c.classify(ctx, failure{err: err}))
		return
	}
	var w wireCompletion
	if err := json.Unmarshal(body, &w); err != nil {
		yield(llm.Chunk{}, c.classify(ctx, failure{body: body, err: err, malformed: true}))
		return
	}
	if w.hasError() {
		yield(llm.Chunk{}, c.classify(ctx, failure{body: body, inline: true}))
		return
	}
	r, err := w.response()
	if err != nil {
		yield(llm.Chunk{}, c.classify(ctx, failure{err: err}))
		return
	}
	if r.Message.Content != "" && !yield(llm.Chunk{Text: r.Message.Content}, nil) {
		return
	}
	yield(llm.Chunk{Response: r}, nil)
}
