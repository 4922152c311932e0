package llmtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// postMessages sends body to the fake Messages API and returns the status
// and the error message, if any.
func postMessages(t *testing.T, srv *llmtest.AnthropicServer, key, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return res.StatusCode, e.Error.Message, b
}

const use = `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}},{"type":"tool_use","id":"toolu_2","name":"f","input":{}}]}`

// The fake server refuses, with 400 and the API's wording, what the real
// API refuses.
func TestAnthropicServerEnforcesTheRules(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens: Field required"},
		{"no model", `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, "model: Field required"},
		{"no messages", `{"model":"m","max_tokens":10,"messages":[]}`, "at least one message"},
		{"system role", `{"model":"m","max_tokens":10,"messages":[{"role":"system","content":"x"}]}`, "Input should be 'user' or 'assistant'"},
		{"assistant first", `{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":"x"}]}`, "first message must use the \"user\" role"},
		{"two users in a row", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`, "roles must alternate"},
		{"empty text", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "text content blocks must be non-empty"},
		{"tool_use unanswered", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},` + use + `,{"role":"user","content":"b"}]}`,
			"`tool_use` ids were found without `tool_result` blocks immediately after: toolu_1, toolu_2"},
		{"one of two answered", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},` + use +
			`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}]}`, "immediately after: toolu_2"},
		{"tool_use last", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},` + use + `]}`, "without `tool_result` blocks"},
		{"tool_result of nothing", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"x"}]}]}`,
			"unexpected `tool_use_id` found in `tool_result` blocks: toolu_9"},
		{"tool_result after text", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},` + use +
			`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"},{"type":"text","text":"and"},{"type":"tool_result","tool_use_id":"toolu_2","content":"y"}]}]}`,
			"tool_result blocks must come first"},
		{"five breakpoints", `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}],
			"tools":[{"name":"a","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}},{"name":"b","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}},{"type":"text","text":"y","cache_control":{"type":"ephemeral"}}]}]}`,
			"A maximum of 4 blocks with cache_control may be provided. Found 5."},
		{"cache_control type", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"forever"}}]}]}`, "Input should be 'ephemeral'"},
		{"tool_choice names no tool", `{"model":"m","max_tokens":10,"tool_choice":{"type":"tool","name":"g"},"messages":[{"role":"user","content":"hi"}]}`, `tool "g" not found`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			model := llmtest.NewScript(llmtest.Text("never"))
			srv := llmtest.NewAnthropicServer(model)
			defer srv.Close()
			status, msg, body := postMessages(t, srv, "", tc.body)
			if status != 400 || !strings.Contains(msg, tc.want) {
				t.Errorf("status %d, %s; want 400 %q", status, body, tc.want)
			}
			if model.Calls() != 0 {
				t.Error("the model was called for an invalid request")
			}
		})
	}

	// A well-formed tool round trip is served.
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(llmtest.Text("ok")))
	defer srv.Close()
	status, _, body := postMessages(t, srv, "", `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"a"},`+use+
		`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"y"},{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"x"}]},{"type":"text","text":"thanks"}]}]}`)
	if status != 200 {
		t.Fatalf("valid request: %d %s", status, body)
	}
	got := srv.Requests()[0].Request.Messages
	if err := llm.CheckPairing(got); err != nil || len(got) != 5 || got[2].ToolCallID != "toolu_2" || got[3].Content != "x" || got[3].Name != "f" {
		t.Errorf("decoded %+v (%v)", got, err)
	}
}

// The key goes in x-api-key; anthropic-version is required.
func TestAnthropicServerHeaders(t *testing.T) {
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(llmtest.Text("ok")), llmtest.WithAPIKey("sk-ant-right"))
	defer srv.Close()
	body := `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	if status, msg, _ := postMessages(t, srv, "sk-ant-wrong", body); status != 401 || msg != "invalid x-api-key" {
		t.Errorf("wrong key: %d %q", status, msg)
	}
	if status, msg, _ := postMessages(t, srv, "", body); status != 401 || !strings.Contains(msg, "x-api-key header is required") {
		t.Errorf("no key: %d %q", status, msg)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/messages", bytes.NewReader([]byte(body)))
	req.Header.Set("x-api-key", "sk-ant-right")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Errorf("no anthropic-version: %d", res.StatusCode)
	}
	if status, _, b := postMessages(t, srv, "sk-ant-right", body); status != 200 {
		t.Errorf("right key: %d %s", status, b)
	}
}

// The server reports cache writes and reads like the API: the prefix up to
// a breakpoint is written once, read by every later request that repeats
// it under the same key, and a different key has a cache of its own.
func TestAnthropicServerCacheAccounting(t *testing.T) {
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(llmtest.Text("a"), llmtest.Text("b"), llmtest.Text("c"), llmtest.Text("d")))
	defer srv.Close()
	system := strings.Repeat("rules ", 200)
	req := func(user string) string {
		return `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"` + system + `","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"` + user + `"}]}`
	}
	usage := func(key, body string) map[string]int {
		t.Helper()
		status, _, b := postMessages(t, srv, key, body)
		var out struct{ Usage map[string]int }
		if status != 200 || json.Unmarshal(b, &out) != nil {
			t.Fatalf("%d %s", status, b)
		}
		return out.Usage
	}
	first := usage("k1", req("one"))
	if first["cache_creation_input_tokens"] == 0 || first["cache_read_input_tokens"] != 0 || first["input_tokens"] == 0 {
		t.Fatalf("first request: %v", first)
	}
	second := usage("k1", req("two, longer"))
	if second["cache_read_input_tokens"] != first["cache_creation_input_tokens"] || second["cache_creation_input_tokens"] != 0 ||
		second["input_tokens"] <= first["input_tokens"]-1 {
		t.Errorf("second request: %v (first %v)", second, first)
	}
	if other := usage("k2", req("one")); other["cache_read_input_tokens"] != 0 || other["cache_creation_input_tokens"] == 0 {
		t.Errorf("another key read the first key's cache: %v", other)
	}
	u := srv.Usage()
	if u.CacheReadTokens != second["cache_read_input_tokens"] || u.CacheWriteTokens != 2*first["cache_creation_input_tokens"] {
		t.Errorf("Usage %+v", u)
	}
}

// Below WithMinCacheTokens a breakpoint caches nothing, as on the API.
func TestAnthropicServerMinCacheTokens(t *testing.T) {
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(llmtest.Text("a"), llmtest.Text("b")), llmtest.WithMinCacheTokens(1024))
	defer srv.Close()
	short := `{"model":"m","max_tokens":10,"system":[{"type":"text","text":"short","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"hi"}]}`
	for range 2 {
		if status, _, b := postMessages(t, srv, "", short); status != 200 || !strings.Contains(string(b), `"cache_creation_input_tokens":0,"cache_read_input_tokens":0`) {
			t.Fatalf("%d %s", status, b)
		}
	}
}
