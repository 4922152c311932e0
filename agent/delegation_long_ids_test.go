package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// spawnOnceWith is a coordinator that makes one spawn_agent call with args
// and reports the tool result it got; workers answer "Found it.".
func spawnOnceWith(args map[string]any, got *string) llm.Client {
	return llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if isWorker(req) {
			return llmtest.Reply{Text: "Found it."}
		}
		if r, ok := toolResults(req)["sp1"]; ok {
			*got = r.Content
			return llmtest.Reply{Text: "ok"}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp1", args)}}
	})
}

// The orchestrator takes tenant and conversation ids up to agent.MaxIDLen
// (255) bytes, "the one ID limit of every valet package": a sub-agent's
// result in such a conversation is stored and gets its [agent_result:ID]
// like any other, rather than the spawn saying it could not be stored.
func TestSpawnResultStoredForLongTenantID(t *testing.T) {
	var got string
	eng := newEngine(t)
	o := newOrch(t, spawnOnceWith(map[string]any{"task": "Find the hotel."}, &got),
		agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	tenant := "oidc|" + strings.Repeat("a1b2c3d4", 12) // 101 bytes, a plausible subject
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: tenant, ConversationID: "c1", Text: "Go."}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "[stored as [agent_result:") {
		t.Fatalf("spawn result for a %d-byte tenant id: %q, want the result stored with its reference", len(tenant), got)
	}
}

// Background work is open to every conversation the orchestrator takes:
// a conversation id of 100 bytes (under agent.MaxIDLen) starts a graph.
func TestBackgroundSpawnForLongConversationID(t *testing.T) {
	var got string
	eng := newEngine(t)
	o := newOrch(t, spawnOnceWith(map[string]any{"task": "Watch prices.", "background": true}, &got),
		agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	conv := "telegram:chat:-1001234567890:thread:" + strings.Repeat("9", 64)
	if _, err := o.HandleMessage(context.Background(), agent.Message{TenantID: "u1", ConversationID: conv, Text: "Go."}); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "Started in the background as graph ") {
		t.Fatalf("background spawn in a %d-byte conversation: %q, want it started", len(conv), got)
	}
}
