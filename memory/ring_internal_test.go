package memory

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
)

// TestHistoryRingMatchesASlice appends random turns to histories of
// several caps and checks History and AppendHistory against the plain
// model: the newest MaxMessages messages, cut to the limit, without
// leading tool results.
func TestHistoryRingMatchesASlice(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, maxMsgs := range []int{1, 2, 3, 7, 20, 64} {
		m := newInMemory(t, Config{MaxMessages: maxMsgs})
		var all []llm.Message
		for turn := range 60 {
			msgs := []llm.Message{llm.UserMessage(fmt.Sprintf("u%d", turn))}
			for c := range rng.IntN(3) {
				id := fmt.Sprintf("c%d_%d", turn, c)
				msgs = append(msgs,
					llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "t", Arguments: []byte(`{"a":1}`)}}},
					llm.Message{Role: llm.RoleTool, ToolCallID: id, Name: "t", Content: "r" + id})
			}
			msgs = append(msgs, llm.AssistantMessage(fmt.Sprintf("a%d", turn)))
			if err := m.Append(ctx, "t", "c", msgs...); err != nil {
				t.Fatal(err)
			}
			all = append(all, msgs...)
			kept := all[max(0, len(all)-maxMsgs):]
			for _, limit := range []int{0, 1, 2, 5, maxMsgs, 100} {
				want := kept
				if limit > 0 && len(want) > limit {
					want = want[len(want)-limit:]
				}
				for len(want) > 0 && want[0].Role == llm.RoleTool {
					want = want[1:]
				}
				got, err := m.History(ctx, "t", "c", limit)
				if err != nil {
					t.Fatal(err)
				}
				if !equalMessages(got, want) {
					t.Fatalf("max %d turn %d limit %d: History = %v, want %v", maxMsgs, turn, limit, got, want)
				}
				dst := []llm.Message{llm.SystemMessage("x")}
				got, err = m.AppendHistory(ctx, dst, "t", "c", limit)
				if err != nil {
					t.Fatal(err)
				}
				if got[0].Content != "x" || !equalMessages(got[1:], want) {
					t.Fatalf("max %d turn %d limit %d: AppendHistory = %v, want x then %v", maxMsgs, turn, limit, got, want)
				}
			}
			if c := m.convs[convKey{"t", "c"}].Value.(*conversation); cap(c.msgs) > maxMsgs {
				t.Fatalf("max %d: the history holds %d slots", maxMsgs, cap(c.msgs))
			}
		}
	}
}

func equalMessages(a, b []llm.Message) bool {
	return slices.EqualFunc(a, b, func(x, y llm.Message) bool {
		return x.Role == y.Role && x.Content == y.Content && x.ToolCallID == y.ToolCallID &&
			slices.EqualFunc(x.ToolCalls, y.ToolCalls, func(p, q llm.ToolCall) bool {
				return p.ID == q.ID && p.Name == q.Name && string(p.Arguments) == string(q.Arguments)
			})
	})
}

// TestAppendHistoryAllocatesNothingWithRoom: loading a history into a
// buffer with room costs no allocation.
func TestAppendHistoryAllocatesNothingWithRoom(t *testing.T) {
	ctx := context.Background()
	m := newInMemory(t, Config{MaxMessages: 10})
	for i := range 7 {
		if err := m.Append(ctx, "t", "c", llm.UserMessage(fmt.Sprint(i)), llm.AssistantMessage("a")); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]llm.Message, 0, 16)
	allocs := testing.AllocsPerRun(100, func() {
		out, err := m.AppendHistory(ctx, buf[:0], "t", "c", 8)
		if err != nil || len(out) != 8 {
			t.Fatalf("AppendHistory = %d messages, %v", len(out), err)
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendHistory allocates %v times per call", allocs)
	}
}

// History starts at the newest summary within the limit.
func TestHistoryStartsAtNewestSummary(t *testing.T) {
	ctx := context.Background()
	m := newInMemory(t, Config{})
	sum := func(s string) llm.Message { return llm.Message{Role: llm.RoleSystem, Name: SummaryName, Content: s} }
	turns := [][]llm.Message{
		{llm.UserMessage("u1"), llm.AssistantMessage("a1")},
		{sum("s1"), llm.UserMessage("u2"), llm.AssistantMessage("a2")},
		{llm.UserMessage("u3"), llm.AssistantMessage("a3")},
		{sum("s2"), llm.AssistantMessage("a3"), llm.UserMessage("u4"), llm.AssistantMessage("a4")},
		{llm.UserMessage("u5"), llm.AssistantMessage("a5")},
	}
	for _, turn := range turns {
		if err := m.Append(ctx, "t", "c", turn...); err != nil {
			t.Fatal(err)
		}
	}
	for limit, want := range map[int]string{0: "s2 a3 u4 a4 u5 a5", 6: "s2 a3 u4 a4 u5 a5", 100: "s2 a3 u4 a4 u5 a5", 3: "a4 u5 a5"} {
		h, err := m.History(ctx, "t", "c", limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, msg := range h {
			got = append(got, msg.Content)
		}
		if g := strings.Join(got, " "); g != want {
			t.Fatalf("History(%d) = %q, want %q", limit, g, want)
		}
	}
}
