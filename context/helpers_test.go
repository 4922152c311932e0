package context_test

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
)

// hist builds a conversation from a compact notation, one token per message:
//
//	s0        system message "s0"
//	u1        user message "u1"
//	a2        assistant message "a2"
//	a3(x,y)   assistant message "a3" calling tools with ids x and y
//	(x)       assistant message without text calling x
//	t(x)      tool message answering x (its content is the token, "t(x)")
//
// A "*N" suffix on the text (u1*100) gives the message a weight of N tokens
// under weightTokens.
func hist(spec string) []llm.Message {
	var msgs []llm.Message
	for _, tok := range strings.Fields(spec) {
		text, ids := tok, []string(nil)
		if i := strings.IndexByte(tok, '('); i >= 0 {
			text = tok[:i]
			j := strings.IndexByte(tok, ')')
			ids = strings.Split(tok[i+1:j], ",")
		}
		switch {
		case strings.HasPrefix(tok, "t("):
			msgs = append(msgs, llm.Message{Role: llm.RoleTool, ToolCallID: ids[0], Name: "tool", Content: tok})
		case strings.HasPrefix(tok, "s"):
			msgs = append(msgs, llm.SystemMessage(text))
		case strings.HasPrefix(tok, "u"):
			msgs = append(msgs, llm.UserMessage(text))
		case strings.HasPrefix(tok, "a"), strings.HasPrefix(tok, "("):
			var calls []llm.ToolCall
			for _, id := range ids {
				calls = append(calls, llm.ToolCall{ID: id, Name: "tool", Arguments: json.RawMessage(`{}`)})
			}
			msgs = append(msgs, llm.AssistantMessage(text, calls...))
		default:
			panic("bad token " + tok)
		}
	}
	return msgs
}

// render is the inverse of hist.
func render(msgs []llm.Message) string {
	parts := make([]string, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case m.Role == llm.RoleTool:
			parts = append(parts, m.Content)
		case len(m.ToolCalls) > 0:
			ids := make([]string, len(m.ToolCalls))
			for i, c := range m.ToolCalls {
				ids[i] = c.ID
			}
			parts = append(parts, m.Content+"("+strings.Join(ids, ",")+")")
		default:
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(parts, " ")
}

// weightTokens is a tokenizer for exact tests: "u1*100" is 100 tokens,
// every other text 0. A message then costs MessageOverheadTokens + its
// weight + ToolCallOverheadTokens per call.
func weightTokens(text string) int {
	i := strings.LastIndexByte(text, '*')
	if i < 0 {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(text[i+1:], ")"))
	if err != nil {
		return 0
	}
	return n
}

func mustManager(t testing.TB, cfg agentctx.Config) *agentctx.Manager {
	t.Helper()
	m, err := agentctx.NewManager(cfg)
	if err != nil {
		t.Fatalf("NewManager(%+v): %v", cfg, err)
	}
	return m
}

// clone deep-copies msgs so a test can check the original was not modified.
func clone(msgs []llm.Message) []llm.Message {
	if msgs == nil {
		return nil
	}
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		if m.ToolCalls != nil {
			calls := make([]llm.ToolCall, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				if c.Arguments != nil {
					c.Arguments = append(json.RawMessage(nil), c.Arguments...)
				}
				calls[j] = c
			}
			m.ToolCalls = calls
		}
		out[i] = m
	}
	return out
}

func assertUntouched(t *testing.T, op string, before, after []llm.Message) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("%s modified its input:\nbefore %s\nafter  %s", op, render(before), render(after))
	}
}

func assertPaired(t *testing.T, op string, msgs []llm.Message) {
	t.Helper()
	if err := llm.CheckPairing(msgs); err != nil {
		t.Fatalf("%s broke pairing: %v\n%s", op, err, render(msgs))
	}
}
