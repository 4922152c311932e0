package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"

	"github.com/valetkit/valet/llm"
)

// TestStreamRepeatedIDsAtDistinctIndexes: two streamed calls at index 0 and
// 1 that both carry the id "call_1" are two calls, not one whose arguments
// are two objects glued together; they get the same ids and arguments as
// the equivalent non-streamed reply.
func TestStreamRepeatedIDsAtDistinctIndexes(t *testing.T) {
	streams := map[string][]string{
		"arguments over several deltas": {
			`{"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"city\":"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\"Rome\"}"}}]}}]}`,
			finishCalls2, "[DONE]"},
		"each call whole": {
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}}]}`,
			finishCalls2, "[DONE]"},
		"interleaved, id repeated on every delta": {
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}},{"index":1,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}`,
			`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_1","function":{"arguments":"\"Rome\"}"}},{"index":0,"id":"call_1","function":{"arguments":"\"Paris\"}"}}]}}]}`,
			finishCalls2, "[DONE]"},
	}

	const body = `{"id":"x","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[` +
		`{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},` +
		`{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}}]}`
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	})
	resp, err := c.Complete(t.Context(), userReq("hi"))
	if err != nil {
		t.Fatal(err)
	}
	whole := resp.Message.ToolCalls
	checkCalls(t, whole, []wantCall{
		{"call_1", "get_weather", `{"city":"Paris"}`},
		{"call_2", "get_weather", `{"city":"Rome"}`},
	})

	for name, payloads := range streams {
		t.Run(name, func(t *testing.T) {
			streamed := streamCalls(t, payloads...)
			for _, tc := range streamed {
				var obj map[string]any
				if json.Unmarshal(tc.Arguments, &obj) != nil || obj[RawArgumentsKey] != nil {
					t.Errorf("call %s: arguments %s are not one JSON object", tc.ID, tc.Arguments)
				}
			}
			if !reflect.DeepEqual(streamed, whole) {
				t.Fatalf("streamed %s\nComplete %s", callsString(streamed), callsString(whole))
			}
			if err := llm.CheckPairing([]llm.Message{llm.AssistantMessage("", streamed...),
				llm.ToolResultMessage(streamed[0], "a", false), llm.ToolResultMessage(streamed[1], "b", false)}); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStreamRepeatedIDsNoIndex: a server that sends no index and repeats
// the id of a finished call for a new whole call gets two calls too.
func TestStreamRepeatedIDsNoIndex(t *testing.T) {
	got := streamCalls(t,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}}]}`,
		finishCalls2, "[DONE]")
	checkCalls(t, got, []wantCall{
		{"call_1", "get_weather", `{"city":"Paris"}`},
		{"call_2", "get_weather", `{"city":"Rome"}`},
	})
}
