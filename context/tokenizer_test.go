package context_test

import (
	"math"
	"strings"
	"testing"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
)

// A user tokenizer is foreign code: a negative count (an error sentinel
// such as -1) must not make a history look smaller, and a huge one must not
// overflow the sums into negative numbers that hide an overflow.
func TestTokenizerOutOfRange(t *testing.T) {
	for name, count := range map[string]func(string) int{
		"negative": func(s string) int {
			if strings.HasPrefix(s, "bad") {
				return -1 << 40
			}
			return len(s)
		},
		"huge": func(s string) int { return math.MaxInt },
	} {
		t.Run(name, func(t *testing.T) {
			m := mustManager(t, agentctx.Config{CountTokens: count, TokenLimit: 1000, TrimThreshold: 0.5})
			msgs := []llm.Message{
				llm.UserMessage(strings.Repeat("x", 2000)),
				llm.AssistantMessage("ok"),
				llm.UserMessage("bad input"),
			}
			if n := m.CountTokens("bad input"); n < 0 {
				t.Errorf("CountTokens = %d, want >= 0", n)
			}
			if n := m.Tokens(msgs); n <= m.TrimBudget() {
				t.Errorf("Tokens = %d, want > budget %d", n, m.TrimBudget())
			}
			if !m.NeedsTrim(msgs) {
				t.Error("NeedsTrim = false for a history far over the budget")
			}
			if got := m.Trim(msgs); len(got) == len(msgs) {
				t.Errorf("Trim kept everything: %d messages", len(got))
			}
		})
	}
	// A tiny CharsPerToken must not overflow the estimate either.
	m := mustManager(t, agentctx.Config{CharsPerToken: 1e-300})
	if n := m.CountTokens("hello"); n <= 0 {
		t.Errorf("CountTokens with CharsPerToken 1e-300 = %d, want > 0", n)
	}
	if n := m.Tokens([]llm.Message{llm.UserMessage("a"), llm.UserMessage("b")}); n <= 0 {
		t.Errorf("Tokens = %d, want > 0", n)
	}
}
