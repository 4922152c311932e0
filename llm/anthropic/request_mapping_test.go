package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/valetkit/valet/llm"
)

// How an llm.Request becomes a Messages API body: leading system messages
// are the system blocks, a later one a text block of a user turn; the tool
// results of one turn go back as one user turn; tool choices, max_tokens
// and the model map onto the API's fields.
func TestRequestMapping(t *testing.T) {
	c := New(Config{Model: "claude-haiku-4-5", MaxTokens: 777, DisableCaching: true})
	call1 := llm.ToolCall{ID: "toolu_1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}
	call2 := llm.ToolCall{ID: "toolu_2", Name: "f"} // no arguments: sent as {}
	w, err := c.request(llm.Request{
		Messages: []llm.Message{
			llm.SystemMessage("persona"), llm.SystemMessage("time"),
			llm.UserMessage("do it"),
			llm.AssistantMessage("", call1, call2),
			llm.ToolResultMessage(call1, "one", false), llm.ToolResultMessage(call2, "boom", true),
			llm.SystemMessage("budget note"),
		},
		Tools:      []llm.ToolSpec{{Name: "f"}},
		ToolChoice: llm.ToolChoiceRequired,
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(w)
	want := `{"model":"claude-haiku-4-5","max_tokens":777,` +
		`"system":[{"type":"text","text":"persona"},{"type":"text","text":"time"}],` +
		`"messages":[{"role":"user","content":[{"type":"text","text":"do it"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":1}},{"type":"tool_use","id":"toolu_2","name":"f","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"one"},{"type":"tool_result","tool_use_id":"toolu_2","content":"boom","is_error":true},{"type":"text","text":"budget note"}]}],` +
		`"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any"}}`
	if string(b) != want {
		t.Errorf("body\n%s\nwant\n%s", b, want)
	}

	for choice, want := range map[llm.ToolChoice]string{llm.ToolChoiceNone: `{"type":"none"}`, "f": `{"type":"tool","name":"f"}`} {
		w, _ := c.request(llm.Request{Messages: []llm.Message{llm.UserMessage("x")}, ToolChoice: choice, Model: "claude-opus-4-5", MaxTokens: 5}, true)
		got, _ := json.Marshal(w.ToolChoice)
		if string(got) != want || w.Model != "claude-opus-4-5" || w.MaxTokens != 5 || !w.Stream {
			t.Errorf("choice %q: %s, model %s, max_tokens %d", choice, got, w.Model, w.MaxTokens)
		}
	}
	if _, err := c.request(llm.Request{Messages: []llm.Message{{Role: llm.RoleTool, Content: "x"}}}, false); llm.KindOf(err) != llm.KindBadRequest {
		t.Errorf("tool message without id: %v", err)
	}
	if d := New(Config{}); d.Model() != DefaultModel || d.maxTokens != DefaultMaxTokens || !d.caching {
		t.Errorf("defaults: %+v", d)
	}
}
