package anthropic_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/anthropic"
	"github.com/valetkit/valet/llm/llmtest"
)

var lookupTool = llm.ToolSpec{
	Name:        "lookup",
	Description: "Looks a record up by id",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
}

// breakpoints returns where a request body put cache_control: "tools.N",
// "system.N", "messages.N.M".
func breakpoints(t *testing.T, body []byte) []string {
	t.Helper()
	type block struct {
		CacheControl json.RawMessage `json:"cache_control"`
	}
	var req struct {
		Tools    []block `json:"tools"`
		System   []block `json:"system"`
		Messages []struct {
			Content []block `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatal(err)
	}
	var at []string
	for i, b := range req.Tools {
		if b.CacheControl != nil {
			at = append(at, fmt.Sprintf("tools.%d", i))
		}
	}
	for i, b := range req.System {
		if b.CacheControl != nil {
			at = append(at, fmt.Sprintf("system.%d", i))
		}
	}
	for i, m := range req.Messages {
		for j, b := range m.Content {
			if b.CacheControl != nil {
				at = append(at, fmt.Sprintf("messages.%d.%d", i, j))
			}
		}
	}
	return at
}

// The client marks the last tool, the last system block, the turn the
// previous call ended with and the newest turn: four breakpoints, the
// API's limit.
func TestCacheBreakpointsPlaced(t *testing.T) {
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(llmtest.Text("done"), llmtest.Text("done")))
	defer srv.Close()
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: srv.Client()})
	c1 := llm.ToolCall{ID: "toolu_1", Name: "lookup", Arguments: json.RawMessage(`{"id":"a"}`)}
	c2 := llm.ToolCall{ID: "toolu_2", Name: "lookup", Arguments: json.RawMessage(`{"id":"b"}`)}
	req := llm.Request{
		Tools: []llm.ToolSpec{lookupTool, {Name: "other", Parameters: json.RawMessage(`{"type":"object"}`)}},
		Messages: []llm.Message{
			llm.SystemMessage("You are terse."), llm.SystemMessage("Today is Tuesday."),
			llm.UserMessage("Look a and b up."),
			llm.AssistantMessage("Looking.", c1, c2),
			llm.ToolResultMessage(c1, "record a", false), llm.ToolResultMessage(c2, "record b", false),
		},
	}
	if _, err := c.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	// messages: 0 user, 1 assistant (text + 2 tool_use), 2 user (2 tool_result)
	want := []string{"tools.1", "system.1", "messages.0.0", "messages.2.1"}
	if got := breakpoints(t, srv.Requests()[0].Body); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("breakpoints at %v, want %v", got, want)
	}

	off := anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: srv.Client(), DisableCaching: true})
	if _, err := off.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if got := breakpoints(t, srv.Requests()[1].Body); len(got) != 0 {
		t.Errorf("DisableCaching: breakpoints at %v", got)
	}
}

// loopUsage runs a 10-turn agent loop (nine tool calls, then the answer)
// through the client against the fake server and returns what the server
// billed.
func loopUsage(t testing.TB, caching bool) (llm.Usage, []llm.Usage) {
	var replies []llmtest.Reply
	for i := range 9 {
		replies = append(replies, llmtest.Calls(llmtest.Call("lookup", fmt.Sprintf(`{"id":"r%d"}`, i))))
	}
	replies = append(replies, llmtest.Text("Here is the summary."))
	srv := llmtest.NewAnthropicServer(llmtest.NewScript(replies...), llmtest.WithMinCacheTokens(1024)) // Sonnet's minimum
	defer srv.Close()
	c := anthropic.New(anthropic.Config{BaseURL: srv.URL, HTTPClient: srv.Client(), DisableCaching: !caching})
	system := "You are a careful research assistant. " + strings.Repeat("Follow the house rules on sources, tone and format. ", 80)
	msgs := []llm.Message{llm.SystemMessage(system), llm.UserMessage("Summarise records r0 to r8.")}
	var perTurn []llm.Usage
	for turn := range 10 {
		resp, err := llm.Collect(c.Stream(t.Context(), llm.Request{Messages: msgs, Tools: []llm.ToolSpec{lookupTool}}))
		if err != nil {
			t.Fatalf("turn %d: %v", turn, err)
		}
		perTurn = append(perTurn, resp.Usage)
		msgs = append(msgs, resp.Message)
		for _, tc := range resp.Message.ToolCalls {
			msgs = append(msgs, llm.ToolResultMessage(tc, strings.Repeat("field: value; ", 60), false))
		}
	}
	return srv.Usage(), perTurn
}

// The Measure figure of issue 21: input tokens billed at the full price
// over a 10-turn loop with caching on and off, on the fake server's
// accounting (go test -run TestCachingTenTurnLoop -v ./llm/anthropic).
func TestCachingTenTurnLoop(t *testing.T) {
	on, turns := loopUsage(t, true)
	off, _ := loopUsage(t, false)
	price, _ := agent.DefaultPrices().Lookup(anthropic.DefaultModel)
	t.Logf("10-turn loop, caching off: %d input tokens, all at full price; cost $%.4f", off.InputTokens, price.Cost(off))
	t.Logf("10-turn loop, caching on:  %d input tokens, %d at full price, %d written to cache, %d read from cache; cost $%.4f",
		on.InputTokens, on.Uncached(), on.CacheWriteTokens, on.CacheReadTokens, price.Cost(on))
	if on.InputTokens != off.InputTokens || off.CacheReadTokens+off.CacheWriteTokens != 0 {
		t.Fatalf("the same loop: on %+v, off %+v", on, off)
	}
	if on.Uncached()*5 > off.Uncached() {
		t.Errorf("caching on bills %d tokens at full price, off %d: want at most a fifth", on.Uncached(), off.Uncached())
	}
	for i, u := range turns[1:] {
		// Every later turn reads at least the whole previous request.
		if u.CacheReadTokens < turns[i].InputTokens {
			t.Errorf("turn %d read %d tokens from cache; the turn before sent %d", i+1, u.CacheReadTokens, turns[i].InputTokens)
		}
	}
	if price.Cost(on) >= price.Cost(off) {
		t.Errorf("caching on costs $%f, off $%f", price.Cost(on), price.Cost(off))
	}
}
