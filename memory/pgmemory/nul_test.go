package pgmemory_test

import (
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/memory/pgmemory"
)

// A turn whose text holds a NUL byte (a tool result scraped from a binary
// page or an e-mail, a user's paste) must be saved like any other: the
// in-memory provider takes it, and memory.CheckTurn lets it through. jsonb
// rejects the \u0000 escape json.Marshal writes for it, so the whole turn
// is lost (ErrHistoryNotSaved at the orchestrator, every time).
func TestAppendTurnWithNULByte(t *testing.T) {
	db := testDB(t)
	p := open(t, db, pgmemory.Config{})
	turn := []llm.Message{
		llm.UserMessage("read my latest mail"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "read_mail", Arguments: []byte(`{"q":"a\u0000b"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "read_mail", Content: "attachment: PK\x03\x04\x00\x00 binary"},
		llm.AssistantMessage("Your latest mail has a zip attached."),
	}
	if err := memory.CheckTurn(turn); err != nil {
		t.Fatalf("CheckTurn rejects the turn: %v", err)
	}
	mem, err := memory.NewInMemory(memory.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Append(bg, "u1", "c1", turn...); err != nil {
		t.Fatalf("in-memory Append: %v", err)
	}
	if err := p.Append(bg, "u1", "c1", turn...); err != nil {
		t.Fatalf("pgmemory Append of a turn with a NUL byte: %v", err)
	}
	h, err := p.History(bg, "u1", "c1", 0)
	if err != nil || len(h) != 4 {
		t.Fatalf("History = %d messages, %v", len(h), err)
	}
	if h[2].Content != turn[2].Content {
		t.Fatalf("tool result came back as %q", h[2].Content)
	}
}

// Tool-call arguments are stored as the model wrote them when they are
// valid JSON, into jsonb. JSON that Go accepts but jsonb does not — a lone
// surrogate escape (an emoji cut in half by the model), \u0000 — fails the
// whole Append.
func TestAppendArgumentsJSONBRejects(t *testing.T) {
	db := testDB(t)
	p := open(t, db, pgmemory.Config{})
	turn := []llm.Message{
		llm.UserMessage("text Ann a smiley"),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "sms", Arguments: []byte(`{"text":"hi \ud83d"}`)}}},
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "sms", Content: "sent"},
		llm.AssistantMessage("Sent."),
	}
	if err := p.Append(bg, "u1", "c1", turn...); err != nil {
		t.Fatalf("pgmemory Append of arguments with a lone surrogate escape: %v", err)
	}
}
