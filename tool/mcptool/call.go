package mcptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ErrToolFailed is matched by the error of a call the server answered
// with isError: the tool ran and failed. The error's text is the server's.
var ErrToolFailed = errors.New("mcptool: the tool reported an error")

// toolError is a result the server marked isError; its text is what the
// model reads.
type toolError struct{ text string }

func (e *toolError) Error() string        { return e.text }
func (e *toolError) Is(target error) bool { return target == ErrToolFailed }

// pingTimeout bounds the ping that tells a slow tool from a hung server
// after a call timed out.
const pingTimeout = 5 * time.Second

// call runs the tool on the server within Config.CallTimeout. A session
// that is gone is started again; a call that finds the server's session
// missing (it was never seen by the server) is retried once on the new
// session.
func (s *Set) call(ctx context.Context, rt *remoteTool, args json.RawMessage) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		ss, err := s.session(ctx, false)
		if err != nil {
			return "", s.callErr(ctx, err)
		}
		// Checked after the session: starting one lists the tools again.
		if err := s.check(rt); err != nil {
			return "", err
		}
		res, err := ss.cs.CallTool(ctx, &mcp.CallToolParams{Name: rt.remote, Arguments: args})
		if err == nil {
			return s.render(res)
		}
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr) && !localCode(rpcErr.Code):
			// The server answered with an error: the request was wrong,
			// not the session.
			return "", fmt.Errorf("MCP server %q: %s", s.server.Name, s.cut(rpcErr.Message))
		case ctx.Err() != nil:
			if ctx.Err() == context.DeadlineExceeded {
				s.checkAlive(ss)
			}
			return "", s.callErr(ctx, err)
		case errors.Is(err, mcp.ErrSessionMissing) && attempt == 0:
			s.drop(ss) // the server never saw the call: once more on a new session
			continue
		case sessionGone(err) || !ss.alive():
			s.drop(ss)
			return "", fmt.Errorf("%w: the connection to MCP server %q was lost during the call, which may or may not have taken effect; the server is started again on the next call", ErrUnavailable, s.server.Name)
		}
		// The transport failed (the server cannot be reached): a new
		// session on the next call.
		s.drop(ss)
		return "", fmt.Errorf("%w: MCP server %q: %v; the next call starts a new session", ErrUnavailable, s.server.Name, err)
	}
}

// localCode reports whether a JSON-RPC error code is one the SDK makes up
// on this side (the transport rejected the request, a side is closing)
// rather than the server's answer.
func localCode(code int64) bool {
	return code == -32005 || code == -32004 || code == -32003
}

// callErr words a failure of ctx (the call's timeout, or the caller's).
func (s *Set) callErr(ctx context.Context, err error) error {
	if ctx.Err() == context.DeadlineExceeded {
		return fmt.Errorf("%w: MCP server %q did not answer within %s", ErrTimeout, s.server.Name, s.cfg.CallTimeout)
	}
	return err
}

// checkAlive pings a session whose call timed out: a server that does
// not answer the ping either is hung, and is stopped so the next call
// starts it again.
func (s *Set) checkAlive(ss *session) {
	if !ss.alive() {
		s.drop(ss)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(pingTimeout, s.cfg.InitTimeout))
	defer cancel()
	if err := ss.cs.Ping(ctx, nil); err != nil {
		s.log.Warn("mcptool: the server answers neither a call nor a ping; stopping it", "err", err)
		s.drop(ss)
	}
}

// render turns a result into the text the model reads: text content
// joined, other content described in a line, structured content as
// JSON, all cut to Config.MaxResultBytes. An isError result is a
// *toolError with that text.
func (s *Set) render(res *mcp.CallToolResult) (string, error) {
	var b strings.Builder
	line := func(text string) {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(text)
	}
	text := 0
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			line(c.Text)
			text++
		case *mcp.ImageContent:
			line(fmt.Sprintf("[image: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			line(fmt.Sprintf("[audio: %s, %d bytes, not shown]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			line(fmt.Sprintf("[resource link: %s %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			r := c.Resource
			switch {
			case r == nil:
				line("[resource: empty]")
			case r.Blob != nil:
				line(fmt.Sprintf("[resource: %s, %s, %d bytes, not shown]", r.URI, r.MIMEType, len(r.Blob)))
			default:
				line(fmt.Sprintf("[resource: %s]\n%s", r.URI, r.Text))
			}
		case nil:
		default:
			line(fmt.Sprintf("[%s content, not shown]", strings.TrimPrefix(fmt.Sprintf("%T", c), "*mcp.")))
		}
	}
	if res.StructuredContent != nil {
		js, err := json.Marshal(res.StructuredContent)
		if err == nil && !(text > 0 && redundant(b.String(), js)) {
			line(string(js))
		}
	}
	out := s.cut(b.String())
	if res.IsError {
		if out == "" {
			out = "the tool failed without saying why"
		}
		return "", &toolError{text: out}
	}
	return out, nil
}

// redundant reports whether the structured content js says nothing the
// text does not: the text is that JSON document (servers are asked to
// send structured content again as text), or every value in it appears in
// the text as written (a server's {"content": "<the text>"}).
func redundant(text string, js []byte) bool {
	var st any
	if json.Unmarshal(js, &st) != nil {
		return false
	}
	var tv any
	if json.Unmarshal([]byte(text), &tv) == nil {
		x, _ := json.Marshal(tv)
		y, _ := json.Marshal(st)
		if bytes.Equal(x, y) {
			return true
		}
	}
	var inText func(v any) bool
	inText = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				if !inText(e) {
					return false
				}
			}
			return true
		case []any:
			for _, e := range v {
				if !inText(e) {
					return false
				}
			}
			return true
		case string:
			return strings.Contains(text, v)
		case nil:
			return true
		default:
			return strings.Contains(text, fmt.Sprint(v))
		}
	}
	return inText(st)
}

// cut shortens text to Config.MaxResultBytes, at a character boundary,
// saying so.
func (s *Set) cut(text string) string {
	limit := s.cfg.MaxResultBytes
	if len(text) <= limit {
		return text
	}
	n := limit
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	return text[:n] + fmt.Sprintf("\n[result cut: the first %d of %d bytes are shown]", n, len(text))
}
