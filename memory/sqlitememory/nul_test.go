package sqlitememory_test

import (
	"testing"

	"github.com/valetkit/valet/internal/sqlitetest"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/sqlitememory"
)

// A turn holding NUL bytes (a tool result scraped from a binary file, a
// user's paste), arguments with a lone surrogate escape (an emoji cut in
// half by the model) and invalid UTF-8 is saved and read back as the
// in-memory provider keeps it.
func TestAppendHostileText(t *testing.T) {
	p := open(t, sqlitetest.Open(t, 1), sqlitememory.Config{})
	turn := []llm.Message{
		llm.UserMessage("read my latest mail\x00 please"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "read_mail", Arguments: []byte(`{"q":"a\u0000b","text":"hi \ud83d"}`)},
			{ID: "c2", Name: "raw", Arguments: []byte(`not json at all`)},
		}},
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "read_mail", Content: "attachment: PK\x03\x04\x00\x00 binary"},
		{Role: llm.RoleTool, ToolCallID: "c2", Name: "raw", Content: "'); DROP TABLE memory_history; --"},
		llm.AssistantMessage("Your latest mail has a zip attached."),
	}
	if err := p.Append(bg, "u1", "c\x00 1", turn...); err == nil {
		t.Error("a conversation ID with a NUL byte was accepted")
	}
	if err := p.Append(bg, "u1", "c1", turn...); err != nil {
		t.Fatalf("Append: %v", err)
	}
	h, err := p.History(bg, "u1", "c1", 0)
	if err != nil || len(h) != len(turn) {
		t.Fatalf("History = %d messages, %v", len(h), err)
	}
	if h[0].Content != turn[0].Content || h[2].Content != turn[2].Content || h[3].Content != turn[3].Content {
		t.Errorf("contents came back as %q, %q, %q", h[0].Content, h[2].Content, h[3].Content)
	}
	if string(h[1].ToolCalls[1].Arguments) != "not json at all" {
		t.Errorf("arguments that are not JSON came back as %q", h[1].ToolCalls[1].Arguments)
	}
	// Forget by IDs no item can have: nothing, and no error.
	if n, err := p.Forget(bg, "u1", memory.Provenance{ConversationID: "c1\x00"}); err != nil || n != 0 {
		t.Errorf("Forget of a NUL-byte ID = %d, %v", n, err)
	}
	if h, _ := p.History(bg, "u1", "c1", 0); len(h) != len(turn) {
		t.Errorf("after the Forget of another ID, %d messages", len(h))
	}
}
