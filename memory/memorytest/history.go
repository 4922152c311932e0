package memorytest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

func testHistoryOrder(t *testing.T, p memory.Provider) {
	var all []llm.Message
	for i := range 3 {
		turn := chat(fmt.Sprintf("question %d", i), fmt.Sprintf("answer %d", i))
		appendTurn(t, p, "alice", "c1", turn)
		all = append(all, turn...)
	}
	wantMessages(t, "History(0)", all, history(t, p, "alice", "c1", 0))
	for limit := 1; limit <= len(all)+2; limit++ {
		want := all[max(0, len(all)-limit):]
		wantMessages(t, fmt.Sprintf("History(%d)", limit), want, history(t, p, "alice", "c1", limit))
	}
	if h := history(t, p, "alice", "unknown", 0); len(h) != 0 {
		t.Errorf("History of an unknown conversation: %s, want nothing", render(h))
	}
	if err := p.Append(bg, "alice", "c2"); err != nil {
		t.Errorf("Append of no messages: %v", err)
	}
	if h := history(t, p, "alice", "c2", 0); len(h) != 0 {
		t.Errorf("History after Append of no messages: %s, want nothing", render(h))
	}
}

// testHistoryFromSummary: History starts at the newest summary message
// (memory.IsSummary) among the newest limit messages; a system message of
// another name is no summary, and one of another conversation does not
// count.
func testHistoryFromSummary(t *testing.T, p memory.Provider) {
	summary := func(s string) llm.Message {
		return llm.Message{Role: llm.RoleSystem, Name: memory.SummaryName, Content: s}
	}
	other := llm.Message{Role: llm.RoleSystem, Name: "note", Content: "not a summary"}
	appendTurn(t, p, "alice", "c1", chat("q1", "a1"))
	appendTurn(t, p, "alice", "c1", append([]llm.Message{summary("s1")}, chat("q2", "a2")...))
	appendTurn(t, p, "alice", "c1", toolTurn("q3", "a3", "t1"))
	appendTurn(t, p, "alice", "c2", append([]llm.Message{summary("other conversation")}, chat("x", "y")...))
	s2 := append([]llm.Message{summary("s2")}, toolTurn("q3", "a3", "t1")...)
	s2 = append(s2, other)
	appendTurn(t, p, "alice", "c1", s2)
	tail := chat("q4", "a4")
	appendTurn(t, p, "alice", "c1", tail)
	want := append(append([]llm.Message(nil), s2...), tail...)
	wantMessages(t, "History(0) after two summaries", want, history(t, p, "alice", "c1", 0))
	wantMessages(t, "History(100)", want, history(t, p, "alice", "c1", 100))
	wantMessages(t, "History(3)", want[len(want)-3:], history(t, p, "alice", "c1", 3))
	wantMessages(t, "History of c2", append([]llm.Message{summary("other conversation")}, chat("x", "y")...), history(t, p, "alice", "c2", 0))
}

func testHistoryPairing(t *testing.T, p memory.Provider) {
	var all []llm.Message
	for _, turn := range [][]llm.Message{
		chat("hello", "hi"),
		toolTurn("find two things", "found both", "c1", "c2"),
		toolTurn("find one more", "found it", "c3"),
	} {
		appendTurn(t, p, "alice", "conv", turn)
		all = append(all, turn...)
	}
	// all: 0 u, 1 a, 2 u, 3 a(c1,c2), 4 t(c1), 5 t(c2), 6 a, 7 u, 8 a(c3), 9 t(c3), 10 a
	for limit := 0; limit <= len(all)+1; limit++ {
		got := history(t, p, "alice", "conv", limit)
		start := 0
		if limit > 0 {
			start = max(0, len(all)-limit)
		}
		for start < len(all) && all[start].Role == llm.RoleTool {
			start++
		}
		wantMessages(t, fmt.Sprintf("History(%d)", limit), all[start:], got)
		if err := llm.CheckPairing(got); err != nil {
			t.Errorf("History(%d) breaks pairing: %v: %s", limit, err, render(got))
		}
	}
	// A window of 6 would start with the second result of the two calls:
	// it starts after the results instead.
	if got := history(t, p, "alice", "conv", 6); len(got) != 5 || got[0].Content != "found both" {
		t.Errorf("History(6) = %s, want the 5 messages from \"found both\"", render(got))
	}
	if got := history(t, p, "alice", "conv", 2); len(got) != 1 || got[0].Content != "found it" {
		t.Errorf("History(2) = %s, want only \"found it\"", render(got))
	}
}

func testHistoryRoundTrip(t *testing.T, p memory.Provider) {
	calls := []llm.ToolCall{
		{ID: "call_1", Name: "search", Arguments: json.RawMessage(`{"q": "ünïcødé ✓ \"quoted\" <tag> & more", "n": 2, "nested": {"x": [1, 2.5, null, true]}}`)},
		{ID: "call_2", Name: "fail", Arguments: json.RawMessage(`{}`)},
	}
	turn := []llm.Message{
		llm.SystemMessage("a summary of what came before"),
		llm.UserMessage("find it\nplease\t✓"),
		{Role: llm.RoleAssistant, Content: "let me look", ToolCalls: calls},
		{Role: llm.RoleTool, Content: `{"found": true}`, ToolCallID: "call_1", Name: "search"},
		{Role: llm.RoleTool, Content: "boom", ToolCallID: "call_2", Name: "fail", IsError: true},
		llm.AssistantMessage("found it, though one lookup failed"),
	}
	appendTurn(t, p, "alice", "conv", turn)
	wantMessages(t, "History", turn, history(t, p, "alice", "conv", 0))
}

func testAppendCopies(t *testing.T, p memory.Provider) {
	turn := toolTurn("question", "answer", "c1")
	want := toolTurn("question", "answer", "c1")
	appendTurn(t, p, "alice", "conv", turn)
	turn[0].Content = "changed"
	turn[1].ToolCalls[0].Name = "changed"
	turn[1].ToolCalls[0].Arguments[2] = 'X'
	turn[2].Content = "changed"
	wantMessages(t, "History after the caller changed what it appended", want, history(t, p, "alice", "conv", 0))

	h := history(t, p, "alice", "conv", 0)
	h[0].Content = "changed"
	h[1].ToolCalls[0].Name = "changed"
	h[1].ToolCalls[0].Arguments[2] = 'X'
	slices.Reverse(h)
	wantMessages(t, "History after the caller changed what History returned", want, history(t, p, "alice", "conv", 0))
}

func testAppendInvalid(t *testing.T, p memory.Provider) {
	good := chat("hello", "hi")
	appendTurn(t, p, "alice", "conv", good)

	long := strings.Repeat("x", memory.MaxIDLen+1)
	for _, tc := range []struct {
		name         string
		tenant, conv string
	}{
		{"empty tenant", "", "conv"},
		{"empty conversation", "alice", ""},
		{"long tenant", long, "conv"},
		{"long conversation", "alice", long},
		{"tenant not UTF-8", "al\xffice", "conv"},
		{"conversation with NUL", "alice", "co\x00nv"},
	} {
		wantInvalid(t, "Append with "+tc.name, p.Append(bg, tc.tenant, tc.conv, good...))
		_, err := p.History(bg, tc.tenant, tc.conv, 0)
		wantInvalid(t, "History with "+tc.name, err)
	}
	if _, err := p.History(bg, "alice", "conv", -1); !errors.Is(err, memory.ErrInvalid) {
		t.Errorf("History with a negative limit: got %v, want memory.ErrInvalid", err)
	}
	if id := strings.Repeat("x", memory.MaxIDLen); p.Append(bg, id, id, good...) != nil {
		t.Errorf("Append with IDs of MaxIDLen bytes failed")
	}

	orphan := llm.ToolResultMessage(call("c9"), "result", false)
	for _, tc := range []struct {
		name string
		turn []llm.Message
	}{
		{"a tool result answering no call", []llm.Message{llm.UserMessage("q"), orphan, llm.AssistantMessage("a")}},
		{"a tool result first", []llm.Message{orphan, llm.AssistantMessage("a")}},
		{"a call without its result", []llm.Message{llm.UserMessage("q"), llm.AssistantMessage("", call("c1"), call("c2")), llm.ToolResultMessage(call("c1"), "r", false)}},
		{"a message without a role", []llm.Message{llm.UserMessage("q"), {Content: "who am I"}}},
		{"an unknown role", []llm.Message{{Role: "narrator", Content: "meanwhile"}}},
	} {
		wantInvalid(t, "Append of "+tc.name, p.Append(bg, "alice", "conv", tc.turn...))
		wantInvalid(t, "Append to a new conversation of "+tc.name, p.Append(bg, "alice", "new", tc.turn...))
	}
	wantMessages(t, "History after rejected Appends", good, history(t, p, "alice", "conv", 0))
	if h := history(t, p, "alice", "new", 0); len(h) != 0 {
		t.Errorf("History of a conversation whose every Append was rejected: %s", render(h))
	}
}
