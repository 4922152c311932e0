package context_test

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
)

func TestNewManagerDefaults(t *testing.T) {
	m := mustManager(t, agentctx.Config{})
	got := m.Config()
	if got.CountTokens != nil {
		t.Fatal("CountTokens default should stay nil")
	}
	want := agentctx.Config{
		TokenLimit:         128000,
		TrimThreshold:      0.8,
		MaxHistoryMessages: 40,
		MaxToolResultShare: 0.3,
		MaxToolResultChars: 400000,
		ForceTrimKeep:      5,
		CharsPerToken:      4,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Config() = %+v, want %+v", got, want)
	}
	if b := m.TrimBudget(); b != 102400 {
		t.Errorf("TrimBudget() = %d, want 102400", b)
	}
	if l := m.ToolResultLimit(); l != 153600 { // 0.3 × 128000 × 4 < 400000
		t.Errorf("ToolResultLimit() = %d, want 153600", l)
	}
}

func TestNewManagerKeepsSetFields(t *testing.T) {
	cfg := agentctx.Config{
		TokenLimit: 1000, TrimThreshold: 1, MaxHistoryMessages: 3, MaxToolResultShare: 1,
		MaxToolResultChars: 100, ForceTrimKeep: 2, CharsPerToken: 2.5,
	}
	m := mustManager(t, cfg)
	if got := m.Config(); !reflect.DeepEqual(got, cfg) {
		t.Fatalf("Config() = %+v, want %+v", got, cfg)
	}
	if m.TrimBudget() != 1000 || m.ToolResultLimit() != 100 {
		t.Fatalf("TrimBudget %d ToolResultLimit %d, want 1000 100", m.TrimBudget(), m.ToolResultLimit())
	}
}

func TestToolResultLimit(t *testing.T) {
	tests := []struct {
		name string
		cfg  agentctx.Config
		want int
	}{
		{"defaults: share wins", agentctx.Config{}, 153600},
		{"chars cap wins", agentctx.Config{TokenLimit: 1_000_000}, 400000},
		{"small window", agentctx.Config{TokenLimit: 1000, MaxToolResultShare: 0.5}, 2000},
		{"chars per token", agentctx.Config{TokenLimit: 1000, MaxToolResultShare: 0.5, CharsPerToken: 3}, 1500},
		{"tokenizer uses the default ratio", agentctx.Config{TokenLimit: 1000, MaxToolResultShare: 0.5, CharsPerToken: 3,
			CountTokens: func(string) int { return 1 }}, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustManager(t, tt.cfg).ToolResultLimit(); got != tt.want {
				t.Fatalf("ToolResultLimit() = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestNewManagerRejects(t *testing.T) {
	tests := []struct {
		cfg   agentctx.Config
		field string
	}{
		{agentctx.Config{TokenLimit: -1}, "TokenLimit"},
		{agentctx.Config{TrimThreshold: -0.1}, "TrimThreshold"},
		{agentctx.Config{TrimThreshold: 1.01}, "TrimThreshold"},
		{agentctx.Config{TrimThreshold: math.NaN()}, "TrimThreshold"},
		{agentctx.Config{MaxHistoryMessages: -3}, "MaxHistoryMessages"},
		{agentctx.Config{MaxToolResultShare: 2}, "MaxToolResultShare"},
		{agentctx.Config{MaxToolResultShare: -0.5}, "MaxToolResultShare"},
		{agentctx.Config{MaxToolResultShare: math.NaN()}, "MaxToolResultShare"},
		{agentctx.Config{MaxToolResultChars: -1}, "MaxToolResultChars"},
		{agentctx.Config{ForceTrimKeep: -1}, "ForceTrimKeep"},
		{agentctx.Config{CharsPerToken: -4}, "CharsPerToken"},
		{agentctx.Config{CharsPerToken: math.Inf(1)}, "CharsPerToken"},
		{agentctx.Config{CharsPerToken: math.NaN()}, "CharsPerToken"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			m, err := agentctx.NewManager(tt.cfg)
			if m != nil || !errors.Is(err, agentctx.ErrInvalidConfig) {
				t.Fatalf("NewManager(%+v) = %v, %v; want nil, ErrInvalidConfig", tt.cfg, m, err)
			}
			if !strings.Contains(err.Error(), tt.field) || !strings.HasPrefix(err.Error(), "context: invalid config: ") {
				t.Fatalf("error %q should start with the sentinel and name %s", err, tt.field)
			}
		})
	}

	_, err := agentctx.NewManager(agentctx.Config{TokenLimit: -1, ForceTrimKeep: -2})
	if err == nil || !strings.Contains(err.Error(), "TokenLimit") || !strings.Contains(err.Error(), "ForceTrimKeep") {
		t.Fatalf("every bad field should be named, got %v", err)
	}
}

func TestCountTokensEstimate(t *testing.T) {
	m := mustManager(t, agentctx.Config{})
	for text, want := range map[string]int{"": 0, "a": 1, "abcd": 1, "abcde": 2, strings.Repeat("x", 4000): 1000, "héllo": 2} {
		if got := m.CountTokens(text); got != want {
			t.Errorf("CountTokens(%q) = %d, want %d", text, got, want)
		}
	}
	m2 := mustManager(t, agentctx.Config{CharsPerToken: 2.5})
	if got := m2.CountTokens("abcdef"); got != 3 { // ceil(6 / 2.5)
		t.Errorf("CountTokens with 2.5 chars/token = %d, want 3", got)
	}
}

func TestMessageTokens(t *testing.T) {
	m := mustManager(t, agentctx.Config{})
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	tests := []struct {
		name string
		msg  llm.Message
		want int
	}{
		{"empty", llm.Message{Role: llm.RoleUser}, agentctx.MessageOverheadTokens},
		{"text", llm.UserMessage("hello world!"), agentctx.MessageOverheadTokens + 3},
		{"assistant with a call", llm.AssistantMessage("ok", call),
			agentctx.MessageOverheadTokens + 1 + agentctx.ToolCallOverheadTokens + 2 + 3 + 4},
		{"tool result", llm.ToolResultMessage(call, "sunny", false),
			agentctx.MessageOverheadTokens + 2 + 3 + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := m.MessageTokens(tt.msg); got != tt.want {
				t.Fatalf("MessageTokens = %d, want %d", got, tt.want)
			}
		})
	}
	all := []llm.Message{tests[1].msg, tests[2].msg, tests[3].msg}
	if got, want := m.Tokens(all), tests[1].want+tests[2].want+tests[3].want; got != want {
		t.Fatalf("Tokens = %d, want %d", got, want)
	}
	if m.Tokens(nil) != 0 {
		t.Fatal("Tokens(nil) should be 0")
	}
}

func TestTokenizerOverride(t *testing.T) {
	var seen []string
	words := func(text string) int {
		seen = append(seen, text)
		return len(strings.Fields(text))
	}
	m := mustManager(t, agentctx.Config{CountTokens: words, TokenLimit: 100, TrimThreshold: 0.5})
	if got := m.CountTokens("one two three"); got != 3 {
		t.Fatalf("CountTokens = %d, want 3 (the tokenizer's count)", got)
	}
	call := llm.ToolCall{ID: "c", Name: "search", Arguments: json.RawMessage(`{"q": "a b"}`)}
	msg := llm.AssistantMessage("let me look", call)
	want := agentctx.MessageOverheadTokens + 3 + agentctx.ToolCallOverheadTokens + 1 + 1 + 3
	if got := m.MessageTokens(msg); got != want {
		t.Fatalf("MessageTokens = %d, want %d", got, want)
	}
	found := false
	for _, s := range seen {
		found = found || s == `{"q": "a b"}`
	}
	if !found {
		t.Fatalf("the tokenizer never saw the arguments; saw %q", seen)
	}

	// 50 one-word messages cost 50 × (overhead + 1) tokens under the tokenizer,
	// far over the budget of 50, although their bytes are few.
	short := []llm.Message{llm.UserMessage("hi")}
	if m.NeedsTrim(short) {
		t.Fatal("one short message should not need a trim")
	}
	long := strings.TrimSpace(strings.Repeat("w ", 60))
	if !m.NeedsTrim([]llm.Message{llm.UserMessage(long)}) {
		t.Fatal("60 words over a budget of 50 tokens should need a trim")
	}
}

func TestNeedsTrim(t *testing.T) {
	m := mustManager(t, agentctx.Config{TokenLimit: 1000, TrimThreshold: 0.5, MaxHistoryMessages: 3, CountTokens: weightTokens})
	tests := []struct {
		spec string
		want bool
	}{
		{"", false},
		{"s0 s1 s2 s3 s4", false},               // system messages are not history
		{"s0 u1 a2 u3", false},                  // 3 history messages
		{"s0 u1 a2 u3 a4", true},                // 4 > MaxHistoryMessages
		{"s0 u1 a2 s3 a4", true},                // a later system message counts
		{"s0*480 u1", false},                    // 484 + 4 = 488 ≤ 500
		{"s0*480 u1*12", false},                 // 500 ≤ 500
		{"s0*480 u1*13", true},                  // 501 > 500
		{"a1*100(x,y) t(x)*300 t(y)*82", false}, // 110 + 304 + 86 = 500
		{"a1*100(x,y) t(x)*300 t(y)*83", true},  // 501
		{"u1*100 a2*100 a3*100 u4*100", true},   // 4 messages
	}
	for _, tt := range tests {
		if got := m.NeedsTrim(hist(tt.spec)); got != tt.want {
			t.Errorf("NeedsTrim(%s) = %v (tokens %d), want %v", tt.spec, got, m.Tokens(hist(tt.spec)), tt.want)
		}
	}
}

func TestHotPathDoesNotAllocate(t *testing.T) {
	m := mustManager(t, agentctx.Config{})
	msgs := hist("s0 s1 u2 a3(x,y) t(x) t(y) a4 u5 (z) t(z) a6")
	var sink int
	allocs := testing.AllocsPerRun(100, func() {
		if m.NeedsTrim(msgs) {
			sink++
		}
		sink += m.Tokens(msgs) + m.MessageTokens(msgs[3]) + m.CountTokens("some text")
	})
	if allocs != 0 {
		t.Fatalf("NeedsTrim/Tokens allocate %v times per run, want 0", allocs)
	}
	_ = sink
}

func BenchmarkNeedsTrim(b *testing.B) {
	m := mustManager(b, agentctx.Config{})
	// 39 history messages: under MaxHistoryMessages, so every token is summed.
	var msgs []llm.Message
	for i := range 13 {
		call := llm.ToolCall{ID: "call_" + strings.Repeat("x", i%7), Name: "search", Arguments: json.RawMessage(`{"q":"weather in paris"}`)}
		msgs = append(msgs, llm.UserMessage(strings.Repeat("question ", 30)), llm.AssistantMessage("", call), llm.ToolResultMessage(call, strings.Repeat("result ", 500), false))
	}
	b.ReportAllocs()
	for b.Loop() {
		m.NeedsTrim(msgs)
	}
}
