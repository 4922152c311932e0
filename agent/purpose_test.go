package agent_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/tool"
)

// kindOf tells what a request is for from what it holds, without reading
// its Purpose: the tool it forces, or the note that ends it.
func kindOf(req llm.Request) llm.Purpose {
	switch req.ToolChoice {
	case agent.RememberToolName:
		return llm.PurposeRememberFacts
	case agent.CompactToolName:
		return llm.PurposeCompact
	case approval.ResolveToolName:
		return llm.PurposeResolveApprovals
	case agent.ProvideFieldsToolName:
		return llm.PurposeProvideFields
	}
	if len(req.Tools) > 0 {
		return llm.PurposeLoop
	}
	if last := req.Messages[len(req.Messages)-1]; strings.Contains(last.Content, "These actions wait for the user") {
		return llm.PurposePhrase
	}
	return llm.PurposeFinal
}

// Every request the orchestrator makes says what it is for in
// llm.Request.Purpose: the loop's turns, the answer without tools when
// turns run out, the question phrased for the user, the reading of the
// user's reply to approvals and to missing fields, compaction and fact
// extraction.
func TestEveryCallSaysItsPurpose(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t, memory.Config{})
	seedTurns(t, mem, 12) // enough history for a compaction
	var (
		mu   sync.Mutex
		seen = map[llm.Purpose]int{}
	)
	s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		kind := kindOf(req)
		mu.Lock()
		seen[kind]++
		mu.Unlock()
		if req.Purpose != kind {
			t.Errorf("a %s request says its purpose is %q", kind, req.Purpose)
		}
		switch kind {
		case llm.PurposeRememberFacts:
			return llmtest.Calls(llmtest.Call(agent.RememberToolName, `{"facts":[]}`))
		case llm.PurposeCompact:
			return compactReply("The user asked about the weather in Oslo.", `[]`)
		case llm.PurposeResolveApprovals:
			return llmtest.ApproveAll()
		case llm.PurposeProvideFields:
			return llmtest.ProvideFields(`{"day":"Monday"}`)
		case llm.PurposePhrase, llm.PurposeFinal:
			return llmtest.Text("Here you are.")
		}
		last := req.Messages[len(req.Messages)-1]
		switch {
		case last.Role == llm.RoleTool && last.Name != "get_weather":
			return llmtest.Text("Done.")
		case last.Content == "Save a note called Groceries":
			return llmtest.Calls(llmtest.Call("save_note", `{"title":"Groceries"}`))
		case last.Content == "Mail Ann hello":
			return llmtest.Calls(llmtest.Call("send_email", `{"to":"ann@example.com","subject":"Hello"}`))
		}
		return llmtest.Calls(llmtest.Call("get_weather", `{"city":"Oslo"}`)) // never done: turns run out
	})
	reg := agent.NewRegistry()
	if err := agent.Register(reg, "send_email", "Send an email for the user", &emailAgent{}); err != nil {
		t.Fatal(err)
	}
	if err := agent.Register(reg, "save_note", "Save a note", &noteAgent{}); err != nil {
		t.Fatal(err)
	}
	o := newOrch(t, s, agent.Config{Memory: mem, Agents: reg, Tools: []tool.Tool{weatherTool()},
		MemoryOptions: agent.MemoryOptions{Extract: true},
		Loop:          agent.LoopConfig{MaxTurns: 3, ContextTokenLimit: 4000, CompactThreshold: 0.3, CompactKeepMessages: 3}})
	for _, text := range []string{"Save a note called Groceries", "Monday", "Mail Ann hello", "Send it, thanks a lot", "Weather in Oslo, again and again"} {
		if _, err := o.HandleMessage(ctx, msg(text)); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
	}
	closeOrch(t, o)
	mu.Lock()
	defer mu.Unlock()
	for _, p := range []llm.Purpose{llm.PurposeLoop, llm.PurposeFinal, llm.PurposePhrase, llm.PurposeResolveApprovals,
		llm.PurposeProvideFields, llm.PurposeCompact, llm.PurposeRememberFacts} {
		if seen[p] == 0 {
			t.Errorf("no %s request was made; made: %v", p, seen)
		}
	}
}
