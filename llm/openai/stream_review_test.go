package openai

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/valetkit/valet/llm"
)

func streamCalls(t *testing.T, payloads ...string) []llm.ToolCall {
	t.Helper()
	c := serve(t, func(w http.ResponseWriter, r *http.Request) { sse(w, payloads...) })
	resp, err := llm.Collect(c.Stream(t.Context(), userReq("hi")))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Message.ToolCalls
}

func checkCalls(t *testing.T, got []llm.ToolCall, want []wantCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d calls, want %d: %s", len(got), len(want), callsString(got))
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.Name != w.Name || !sameJSON(g.Arguments, json.RawMessage(w.Args)) {
			t.Errorf("call %d: %s %s %s, want %s %s %s", i, g.ID, g.Name, g.Arguments, w.ID, w.Name, w.Args)
		}
	}
}

func callsString(calls []llm.ToolCall) string {
	b, _ := json.Marshal(calls)
	return string(b)
}

const finishCalls2 = `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`

// TestStreamSameIndexDistinctIDs: Ollama (ollama#15457) and some proxies
// stream every parallel call with "index": 0; the ids tell them apart.
func TestStreamSameIndexDistinctIDs(t *testing.T) {
	got := streamCalls(t,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"CET\"}"}}]}}]}`,
		finishCalls2, "[DONE]")
	checkCalls(t, got, []wantCall{
		{"call_a", "get_weather", `{"city":"Paris"}`},
		{"call_b", "get_time", `{"tz":"CET"}`},
	})
}

// TestStreamNoIndexSameName: older Ollama sends whole calls with no index
// (ollama#7881); two calls of the same tool must stay two calls.
func TestStreamNoIndexSameName(t *testing.T) {
	got := streamCalls(t,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]}}]}`,
		finishCalls2, "[DONE]")
	checkCalls(t, got, []wantCall{
		{"call_0", "get_weather", `{"city":"Paris"}`},
		{"call_1", "get_weather", `{"city":"Rome"}`},
	})
}

// TestStreamCallShapes: out-of-order indexes, a gap, an id in a later delta,
// a name split across deltas, an id re-sent on every delta.
func TestStreamCallShapes(t *testing.T) {
	got := streamCalls(t,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"name":"get_","arguments":""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c0","function":{"name":"a","arguments":"{\"x\""}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"function":{"name":"time","arguments":"{}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c0","function":{"arguments":":1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":2,"id":"c2"}]}}]}`,
		finishCalls2, "[DONE]")
	checkCalls(t, got, []wantCall{
		{"c0", "a", `{"x":1}`},
		{"c2", "get_time", `{}`},
	})
}

// TestStreamArgumentsSplitInsideRune: servers that cut a token's bytes
// send a multi-byte character over two deltas, as raw bytes or as the two
// halves of a surrogate pair; neither may turn into U+FFFD.
func TestStreamArgumentsSplitInsideRune(t *testing.T) {
	// "日" is E6 97 A5; "😀" is U+1F600 = \ud83d\ude00.
	got := streamCalls(t,
		"{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"function\":{\"name\":\"say\",\"arguments\":\"{\\\"t\\\":\\\"\xe6\x97\"}}]}}]}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\xa5 \\ud83d\"}}]}}]}",
		"{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\ude00\\\"}\"}}]}}]}",
		finishCalls2, "[DONE]")
	checkCalls(t, got, []wantCall{{"c", "say", `{"t":"日 😀"}`}})
}
