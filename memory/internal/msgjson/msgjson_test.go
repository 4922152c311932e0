package msgjson

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/valetkit/valet/llm"
)

func TestRoundTrip(t *testing.T) {
	for _, m := range []llm.Message{
		{Role: llm.RoleUser, Content: "hello \x00 <b> é \u2028"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
			{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)},
			{ID: "c2", Name: "g", Arguments: json.RawMessage(`{"a":`)}, // not JSON: kept as text
			{ID: "c3", Name: "h"},
		}},
		{Role: llm.RoleTool, ToolCallID: "c1", Name: "f", Content: "boom", IsError: true},
	} {
		s, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip of %+v gave %+v (stored %s)", m, got, s)
		}
	}
}

func TestDecodeRefusesWhatIsNotJSON(t *testing.T) {
	if _, err := Decode([]byte(`{"role":`)); err == nil {
		t.Fatal("a truncated stored message decoded")
	}
}
