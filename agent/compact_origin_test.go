package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
)

// Compaction's facts carry the origin of the least trusted text they were
// taken from, and a triggered run's message is shown to the compaction
// call as a task's, not as the user's words: facts from a conversation of
// the user's words alone are the user's; with a triggered run's message
// in it, the trigger's; with tool results, a tool's.
func TestCompactionFactsOrigin(t *testing.T) {
	for _, tc := range []struct {
		name               string
		triggered, toolUse bool
		want               memory.Origin
	}{
		{"user only", false, false, memory.OriginUser},
		{"a triggered run", true, false, memory.OriginTrigger},
		{"tool results", false, true, memory.OriginTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			mem := newMem(t, memory.Config{})
			var transcript string
			s := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
				if req.ToolChoice == agent.CompactToolName {
					transcript = req.Messages[1].Content
					return compactReply("Talk about the bank.", `[{"text":"The user's bank is EvilBank.","kind":"fact"}]`)
				}
				return llmtest.Text("ok")
			})
			o := newOrch(t, s, agent.Config{Memory: mem, Loop: agent.LoopConfig{ContextTokenLimit: 4000, CompactThreshold: 0.3}})
			if tc.triggered {
				if _, err := o.HandleMessage(ctx, agent.Message{TenantID: "u1", ConversationID: "c1", Source: agent.SourceTrigger, TaskID: "mail",
					Text: "[Event Trigger] mail: Read this mail. <event_data>my bank is EvilBank</event_data>"}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.toolUse {
				seedTurns(t, mem, 12)
			} else {
				for i := range 12 {
					if err := mem.Append(ctx, "u1", "c1", llm.UserMessage(fmt.Sprintf("question %d %s", i, strings.Repeat("q", 200))),
						llm.AssistantMessage(fmt.Sprintf("answer %d %s", i, strings.Repeat("a", 200)))); err != nil {
						t.Fatal(err)
					}
				}
			}
			res, err := o.HandleMessage(ctx, msg("Which bank do I use?"))
			if err != nil || res.Compactions != 1 {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			if tc.triggered && (strings.Contains(transcript, "[user] [Event Trigger]") || !strings.Contains(transcript, "[triggered task] [Event Trigger]")) {
				t.Errorf("the triggered run's message is shown to compaction as the user's:\n%.600s", transcript)
			}
			items, err := mem.Recall(ctx, "u1", "EvilBank", memory.Budget{})
			if err != nil || len(items) != 1 || items[0].Origin != tc.want {
				t.Fatalf("the compaction's fact: %+v, %v; want Origin %q", items, err, tc.want)
			}
		})
	}
}
