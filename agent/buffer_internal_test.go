package agent

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
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

// The in-place trim of the run's buffer keeps exactly what agentctx's Trim
// keeps, and the running token total stays equal to a full count.
func TestBufferTrimMatchesAgentctxTrim(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 3000 {
		limit := 500 + rng.IntN(4000)
		loop := LoopConfig{MaxHistoryMessages: 1 + rng.IntN(30), ContextTokenLimit: limit}
		o, err := NewOrchestrator(Config{LLM: nopModel{}, Loop: loop})
		if err != nil {
			t.Fatal(err)
		}
		hist := randomHistory(rng, rng.IntN(25))
		c := &conversation{}
		o.appendHistory(c, hist...)
		r := &run{o: o}
		sys := strings.Repeat("s", rng.IntN(600))
		r.open(c, sys, o.ctxm.MessageTokens(llm.SystemMessage(sys)))
		want := o.ctxm.Trim(append([]llm.Message{llm.SystemMessage(sys)}, hist...))
		r.trim()
		if got, w := render(r.window), render(want); got != w {
			t.Fatalf("round %d (max %d, limit %d):\n got %s\nwant %s\n  in %s", round, loop.MaxHistoryMessages, limit, got, w, render(hist))
		}
		if err := llm.CheckPairing(r.window); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if n := o.ctxm.Tokens(c.history()); n != c.tokens {
			t.Fatalf("round %d: running total %d, counted %d", round, c.tokens, n)
		}
		if r.saved != len(c.history()) {
			t.Fatalf("round %d: saved %d of %d", round, r.saved, len(c.history()))
		}
		// Ending the run keeps the newest MaxHistoryMessages, paired, as
		// agentctx.RepairPairing of that suffix does.
		before := append([]llm.Message(nil), c.history()...)
		o.keepHistory(c, r.saved)
		wantKept := before
		if len(before) > loop.MaxHistoryMessages {
			wantKept = agentctx.RepairPairing(before[len(before)-loop.MaxHistoryMessages:])
		}
		if got, w := render(c.history()), render(wantKept); got != w {
			t.Fatalf("round %d keepHistory:\n got %s\nwant %s", round, got, w)
		}
		if n := o.ctxm.Tokens(c.history()); n != c.tokens {
			t.Fatalf("round %d after keepHistory: running total %d, counted %d", round, c.tokens, n)
		}
	}
}

// Many runs on one conversation: messages are pushed, trimmed and kept
// turn after turn, so the buffer's start moves, the messages move back to
// the front when the end is full, and the buffer grows. After every step
// the window equals agentctx's Trim of what it was, the token total equals
// a full count, and the buffer is the slice of its backing array it claims.
func TestBufferOverManyRuns(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		loop := LoopConfig{MaxHistoryMessages: 2 + rng.IntN(40), ContextTokenLimit: 2000 + rng.IntN(20000)}
		o, err := NewOrchestrator(Config{LLM: nopModel{}, Loop: loop})
		if err != nil {
			t.Fatal(err)
		}
		c := &conversation{}
		for step := range 40 {
			r := &run{o: o}
			r.open(c, "system prompt", o.ctxm.MessageTokens(llm.SystemMessage("system prompt")))
			r.push(llm.UserMessage(fmt.Sprintf("user %d %s", step, strings.Repeat("u", rng.IntN(300)))))
			r.commit()
			for range rng.IntN(4) {
				for _, m := range randomHistory(rng, 1+rng.IntN(2)) {
					if m.Role != llm.RoleUser {
						r.push(m)
					}
				}
				before := append([]llm.Message(nil), r.window...)
				r.commit()
				r.trim()
				if got, want := render(r.window), render(o.ctxm.Trim(before)); got != want {
					t.Fatalf("round %d step %d:\n got %s\nwant %s", round, step, got, want)
				}
				if err := llm.CheckPairing(r.window); err != nil {
					t.Fatalf("round %d step %d: %v", round, step, err)
				}
				checkBuffer(t, o, c)
			}
			o.keepHistory(c, r.saved)
			checkBuffer(t, o, c)
		}
	}
}

func checkBuffer(t *testing.T, o *Orchestrator, c *conversation) {
	t.Helper()
	if n := o.ctxm.Tokens(c.history()); n != c.tokens {
		t.Fatalf("running total %d, counted %d", c.tokens, n)
	}
	if len(c.msgs) == 0 {
		return
	}
	if c.dead+len(c.msgs) > len(c.base) || &c.base[c.dead] != &c.msgs[0] {
		t.Fatalf("buffer is not base[%d:]: len %d, base %d", c.dead, len(c.msgs), len(c.base))
	}
	for i := range c.dead {
		if c.base[i].Content != "" || c.base[i].ToolCalls != nil {
			t.Fatalf("dropped slot %d still holds a message", i)
		}
	}
}
