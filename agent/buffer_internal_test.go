package agent

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
)

type nopModel struct{}

func (nopModel) Complete(context.Context, llm.Request) (*llm.Response, error) { return nil, nil }
func (nopModel) Stream(context.Context, llm.Request) iter.Seq2[llm.Chunk, error] {
	return func(func(llm.Chunk, error) bool) {}
}

// randomHistory builds a well-paired history of random groups: user
// messages, assistant texts, and assistant tool calls with their results.
func randomHistory(rng *rand.Rand, groups int) []llm.Message {
	var h []llm.Message
	text := func() string { return strings.Repeat("x", rng.IntN(400)) }
	for g := range groups {
		switch rng.IntN(3) {
		case 0:
			h = append(h, llm.UserMessage(fmt.Sprintf("u%d %s", g, text())))
		case 1:
			h = append(h, llm.AssistantMessage(fmt.Sprintf("a%d %s", g, text())))
		default:
			k := 1 + rng.IntN(3)
			m := llm.Message{Role: llm.RoleAssistant}
			for c := range k {
				m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: fmt.Sprintf("c%d_%d", g, c), Name: "t", Arguments: []byte(`{"q":"` + text() + `"}`)})
			}
			h = append(h, m)
			for c := range k {
				h = append(h, llm.Message{Role: llm.RoleTool, ToolCallID: m.ToolCalls[c].ID, Name: "t", Content: text()})
			}
		}
	}
	return h
}

func render(msgs []llm.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "[%s %s %d %d]", m.Role, m.ToolCallID, len(m.Content), len(m.ToolCalls))
		if len(m.Content) > 3 {
			b.WriteString(m.Content[:3])
		}
	}
	return b.String()
}

// newBufferRun returns a run of o on conversation "c" of tenant "t" whose
// buffer holds the history stored in o's memory provider.
func newBufferRun(t *testing.T, o *Orchestrator, sys string) *run {
	t.Helper()
	r := o.newRun(context.Background(), Message{TenantID: "t", ConversationID: "c"}, nil)
	if err := r.open(); err != nil {
		t.Fatal(err)
	}
	r.setSystem(sys, o.ctxm.MessageTokens(llm.SystemMessage(sys)))
	return r
}

// The in-place trim of the run's buffer keeps exactly what agentctx's Trim
// keeps, and the running token total stays equal to a full count.
func TestBufferTrimMatchesAgentctxTrim(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for round := range 3000 {
		limit := 500 + rng.IntN(4000)
		loop := LoopConfig{MaxHistoryMessages: 1 + rng.IntN(30), ContextTokenLimit: limit}
		o, err := NewOrchestrator(Config{LLM: nopModel{}, Loop: loop})
		if err != nil {
			t.Fatal(err)
		}
		hist := randomHistory(rng, rng.IntN(25))
		if err := o.mem.Append(ctx, "t", "c", hist...); err != nil {
			t.Fatal(err)
		}
		loaded, err := o.History(ctx, "t", "c")
		if err != nil {
			t.Fatal(err)
		}
		sys := strings.Repeat("s", rng.IntN(600))
		r := newBufferRun(t, o, sys)
		if got, want := render(r.buf.history()), render(loaded); got != want {
			t.Fatalf("round %d: loaded\n got %s\nwant %s", round, got, want)
		}
		want := o.ctxm.Trim(append([]llm.Message{llm.SystemMessage(sys)}, loaded...))
		r.trim()
		if got, w := render(r.window), render(want); got != w {
			t.Fatalf("round %d (max %d, limit %d):\n got %s\nwant %s\n  in %s", round, loop.MaxHistoryMessages, limit, got, w, render(loaded))
		}
		if err := llm.CheckPairing(r.window); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkBuffer(t, o, r.buf)
		if turn := r.turn(); len(turn) != 0 {
			t.Fatalf("round %d: a run that added nothing has a turn of %d messages", round, len(turn))
		}
	}
}

// Many runs on one conversation: messages are pushed, trimmed and saved
// turn after turn, so the buffer's start moves, the messages move back to
// the front when the end is full, and the buffer grows. After every step
// the window equals agentctx's Trim of what it was, the token total equals
// a full count, and the buffer is the slice of its backing array it claims.
// However much a trim drops from the window, the run saves its whole turn:
// the stored history is every message pushed, in order.
func TestBufferOverManyRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	ctx := context.Background()
	for round := range 200 {
		loop := LoopConfig{MaxHistoryMessages: 2 + rng.IntN(40), ContextTokenLimit: 2000 + rng.IntN(20000)}
		mem, err := memory.NewInMemory(memory.Config{MaxMessages: 10_000})
		if err != nil {
			t.Fatal(err)
		}
		o, err := NewOrchestrator(Config{LLM: nopModel{}, Loop: loop, Memory: mem})
		if err != nil {
			t.Fatal(err)
		}
		var all []llm.Message
		for step := range 40 {
			r := newBufferRun(t, o, "system prompt")
			user := llm.UserMessage(fmt.Sprintf("user %d %s", step, strings.Repeat("u", rng.IntN(300))))
			r.push(user)
			r.commit()
			all = append(all, user)
			for range rng.IntN(4) {
				var added []llm.Message
				for _, m := range randomHistory(rng, 1+rng.IntN(2)) {
					if m.Role != llm.RoleUser {
						r.push(m)
						added = append(added, m)
					}
				}
				before := append([]llm.Message(nil), r.window...)
				r.commit()
				all = append(all, added...)
				r.trim()
				if got, want := render(r.window), render(o.ctxm.Trim(before)); got != want {
					t.Fatalf("round %d step %d:\n got %s\nwant %s", round, step, got, want)
				}
				if err := llm.CheckPairing(r.window); err != nil {
					t.Fatalf("round %d step %d: %v", round, step, err)
				}
				checkBuffer(t, o, r.buf)
			}
			if rng.IntN(3) == 0 { // an incomplete turn at the end is not saved
				r.push(llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "dangling", Name: "t"}}})
			}
			if err := r.save(); err != nil {
				t.Fatal(err)
			}
			o.putBuffers(r.buf)
			stored, err := mem.History(ctx, "t", "c", 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := render(stored), render(all); got != want {
				t.Fatalf("round %d step %d: stored history\n got %s\nwant %s", round, step, got, want)
			}
		}
	}
}

func checkBuffer(t *testing.T, o *Orchestrator, b *buffers) {
	t.Helper()
	if n := o.ctxm.Tokens(b.history()); n != b.tokens {
		t.Fatalf("running total %d, counted %d", b.tokens, n)
	}
	if b.dead+len(b.msgs) > len(b.base) || &b.base[b.dead] != &b.msgs[0] {
		t.Fatalf("buffer is not base[%d:]: len %d, base %d", b.dead, len(b.msgs), len(b.base))
	}
	for i := range b.dead {
		if b.base[i].Content != "" || b.base[i].ToolCalls != nil {
			t.Fatalf("dropped slot %d still holds a message", i)
		}
	}
}
