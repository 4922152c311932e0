package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/tool"
)

// A model client (any, not only llm/openai's) whose reply asks for 5,000
// tool calls gets at most LoopConfig.MaxToolCallsPerReply of them run; the
// model is told the rest were not, the run completes, and what the model
// is sent and the history keep every call paired with its result.
func TestToolCallsPerReplyCapped(t *testing.T) {
	for _, tc := range []struct {
		name string
		cap  int
		want int
	}{
		{"default", 0, agent.DefaultMaxToolCallsPerReply},
		{"configured", 7, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			calls := make([]llm.ToolCall, 5000)
			for i := range calls {
				calls[i] = llmtest.Call("get_weather", fmt.Sprintf(`{"city":"c%d"}`, i))
			}
			s := llmtest.NewStrictScript(t, llmtest.Calls(calls...), llmtest.Text("Sunny everywhere I looked."))
			mem := newMem(t, memory.Config{})
			o := newOrch(t, paired{t, s}, agent.Config{
				Tools:  []tool.Tool{countedWeather(&runs)},
				Memory: mem,
				Loop:   agent.LoopConfig{MaxToolCallsPerReply: tc.cap, MaxHistoryMessages: 1000},
			})
			res, err := o.HandleMessage(context.Background(), msg("Weather everywhere?"))
			if err != nil || res.Status != agent.StatusCompleted || res.Response != "Sunny everywhere I looked." {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			if n := int(runs.Load()); n != tc.want {
				t.Fatalf("%d tool calls ran, want %d", n, tc.want)
			}
			if len(res.ToolCalls) != tc.want || res.Consumed.ToolCalls != tc.want {
				t.Fatalf("%d calls recorded, Consumed.ToolCalls %d; want %d", len(res.ToolCalls), res.Consumed.ToolCalls, tc.want)
			}
			second := s.Requests()[1].Messages
			results, told := 0, false
			for _, m := range second {
				if m.Role == llm.RoleTool {
					results++
				}
				if m.Role == llm.RoleSystem && strings.Contains(m.Content, "5000 tool calls") {
					told = true
				}
			}
			if results != tc.want || !told {
				t.Fatalf("the model got %d results (want %d) and told=%v", results, tc.want, told)
			}
			h, err := mem.History(context.Background(), "u1", "c1", 100000)
			if err != nil {
				t.Fatal(err)
			}
			if err := llm.CheckPairing(h); err != nil {
				t.Fatalf("history breaks pairing: %v", err)
			}
			if len(h) != tc.want+3 { // user, the calls, their results, the answer
				t.Fatalf("history has %d messages, want %d", len(h), tc.want+3)
			}
		})
	}
	_, err := agent.NewOrchestrator(agent.Config{LLM: llmtest.NewScript(), Loop: agent.LoopConfig{MaxToolCallsPerReply: -1}})
	if !errors.Is(err, agent.ErrInvalidConfig) {
		t.Fatalf("a negative MaxToolCallsPerReply: err = %v", err)
	}
}
