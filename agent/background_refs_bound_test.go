package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/agent/delegate"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// agent.MaxResultRefs bounds the references of "one spawn (one task of a
// graph)": more is an error result, nothing started. A background task
// holding more is refused when the spawn is made, as a foreground spawn
// is — not accepted, its graph submitted, and the task failed later in
// the background.
func TestBackgroundTaskWithTooManyRefsRefusedAtSpawn(t *testing.T) {
	eng := &countingEngine{Engine: newEngine(t)}
	var refs []string
	for i := range agent.MaxResultRefs + 1 {
		id := fmt.Sprintf("r%d", i)
		if err := eng.PutResult(context.Background(), delegate.Result{ID: id, TenantID: "u1", ConversationID: "c1",
			Text: "note " + id, Status: delegate.ResultCompleted}); err != nil {
			t.Fatal(err)
		}
		refs = append(refs, "[agent_result:"+id+"]")
	}
	var got string
	model := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		if r, ok := toolResults(req)["sp1"]; ok {
			got = r.Content
			return llmtest.Reply{Text: "ok"}
		}
		return llmtest.Reply{ToolCalls: []llm.ToolCall{spawnCall("sp1", map[string]any{
			"task": "Merge the notes.", "context": strings.Join(refs, " "), "background": true})}}
	})
	o := newOrch(t, model, agent.Config{SubAgents: subAgents(agent.SubAgentOptions{Engine: eng})})
	if _, err := o.HandleMessage(context.Background(), msg("Merge them later.")); err != nil {
		t.Fatal(err)
	}
	if eng.submits.Load() != 0 || !strings.Contains(got, fmt.Sprint(agent.MaxResultRefs)) {
		t.Fatalf("a background task with %d references: spawn result %q, %d graphs submitted; want an error result naming the limit, nothing submitted",
			agent.MaxResultRefs+1, got, eng.submits.Load())
	}
}
