package openai

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
)

func collectRaw(t *testing.T, body string) (*llm.Response, error) {
	t.Helper()
	c := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	})
	return llm.Collect(c.Stream(t.Context(), userReq("hi")))
}

// TestSSEEventWithoutData: an event that has no data lines (a named
// keep-alive) is not dispatched, as the SSE spec says.
func TestSSEEventWithoutData(t *testing.T) {
	body := "event: ping\n\n" +
		"data: " + textChunk + "\n\n" +
		"event: keep-alive\r\n\r\n" +
		"id: 7\nretry: 1000\n\n" +
		"data:{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	resp, err := collectRaw(t, body)
	if err != nil || resp.Message.Content != "Hel" {
		t.Fatalf("%v %+v", err, resp)
	}
}

// TestSSEVeryLongLine: one data line far beyond bufio's 64KB default (a tool
// call whose arguments arrive in one chunk).
func TestSSEVeryLongLine(t *testing.T) {
	big := strings.Repeat("é", 300<<10)
	args, _ := json.Marshal(map[string]string{"text": big})
	argStr, _ := json.Marshal(string(args))
	chunk := `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"write","arguments":` + string(argStr) + `}}]}}]}`
	body := "data: " + chunk + "\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
	resp, err := collectRaw(t, body)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 || !sameJSON(resp.Message.ToolCalls[0].Arguments, args) {
		t.Fatalf("calls %d", len(resp.Message.ToolCalls))
	}
}
