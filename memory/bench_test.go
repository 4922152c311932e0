package memory_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

// BenchmarkIdleConversations measures the heap the in-memory provider
// holds per idle conversation, with 100,000 conversations of one turn each
// (MaxConversations raised to hold them all; the default keeps 10,000):
//
//	go test -run '^$' -bench BenchmarkIdleConversations -benchtime 1x ./memory/
//
// "chat" is a turn of the user's message and the answer (2 messages);
// "tools" the agent benchmark's turn: the message, 5 turns of 3 tool calls
// with their results, the answer (22 messages). heap-B/conv is the live
// heap after a GC per conversation, texts included; text-B/conv is the
// part that is the messages' text (what any store must hold), so
// heap-B/conv minus text-B/conv is the provider's own cost.
func BenchmarkIdleConversations(b *testing.B) {
	const n = 100_000
	for _, shape := range []string{"chat", "tools"} {
		b.Run(shape, func(b *testing.B) {
			for b.Loop() {
				heap, text := idleHeap(b, n, shape)
				b.ReportMetric(heap, "heap-B/conv")
				b.ReportMetric(text, "text-B/conv")
			}
		})
	}
}

func idleHeap(b *testing.B, n int, shape string) (heap, text float64) {
	ctx := context.Background()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	m := newMem(b, memory.Config{MaxConversations: n})
	textBytes := 0
	for i := range n {
		turn := benchTurn(i, shape)
		for _, msg := range turn {
			textBytes += len(msg.Content)
			for _, c := range msg.ToolCalls {
				textBytes += len(c.ID) + len(c.Name) + len(c.Arguments)
			}
		}
		if err := m.Append(ctx, "tenant", fmt.Sprintf("conv-%d", i), turn...); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap = float64(ms.HeapAlloc-before) / float64(n)
	runtime.KeepAlive(m)
	return heap, float64(textBytes) / float64(n)
}

// benchTurn builds conversation i's turn with texts of its own.
func benchTurn(i int, shape string) []llm.Message {
	turn := []llm.Message{llm.UserMessage(fmt.Sprintf("What's the weather in Paris and Rome, and 2+%d? (%d)", i, i))}
	if shape == "tools" {
		for t := range 5 {
			calls := make([]llm.ToolCall, 3)
			for c := range calls {
				calls[c] = llm.ToolCall{ID: fmt.Sprintf("call_%d_%d_%d", i, t, c), Name: "get_weather", Arguments: []byte(fmt.Sprintf(`{"city":"Paris","days":%d}`, c+1))}
			}
			turn = append(turn, llm.AssistantMessage("", calls...))
			for _, c := range calls {
				turn = append(turn, llm.ToolResultMessage(c, fmt.Sprintf("Sunny, %d°C in Paris", 20+t), false))
			}
		}
	}
	return append(turn, llm.AssistantMessage(fmt.Sprintf("It is sunny in Paris and Rome; 2+%d is %d.", i, 2+i)))
}
