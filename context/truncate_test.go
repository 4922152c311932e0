package context_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	agentctx "github.com/valetkit/valet/context"
	"github.com/valetkit/valet/llm"
)

func TestTruncateTo(t *testing.T) {
	m := mustManager(t, agentctx.Config{})
	line := strings.Repeat("x", 9) + "\n" // 10 bytes a line
	tests := []struct {
		name    string
		content string
		max     int
		want    string
		cut     bool
	}{
		{"short", "hello", 10, "hello", false},
		{"exactly the limit", "0123456789", 10, "0123456789", false},
		{"empty", "", 0, "", false},
		{"no newline: cut at the limit", "0123456789abcdef", 10,
			"0123456789\n…[truncated: showed 10 of 16 characters]", true},
		{"newline in the last 20%", "01234567\n9abcdef", 10,
			"01234567\n…[truncated: showed 8 of 16 characters]", true},
		{"newline right at the limit", "0123456789\nabcdef", 10,
			"0123456789\n…[truncated: showed 10 of 17 characters]", true},
		{"newline before the last 20% is ignored", "0123456\n89abcdef", 10,
			"0123456\n89\n…[truncated: showed 10 of 16 characters]", true},
		{"last of several newlines", strings.Repeat(line, 10), 55,
			strings.Repeat(line, 4) + strings.Repeat("x", 9) + "\n…[truncated: showed 49 of 100 characters]", true},
		{"CRLF loses its CR", "0123456\r\n9abcdef", 10,
			"0123456\n…[truncated: showed 7 of 16 characters]", true},
		{"zero keeps only the marker", "abc", 0, "…[truncated: showed 0 of 3 characters]", true},
		{"negative is zero", "abc", -5, "…[truncated: showed 0 of 3 characters]", true},
		{"thousands separators", strings.Repeat("y", 98765), 12000,
			strings.Repeat("y", 12000) + "\n…[truncated: showed 12,000 of 98,765 characters]", true},
		{"millions", strings.Repeat("z", 1234567), 1000,
			strings.Repeat("z", 1000) + "\n…[truncated: showed 1,000 of 1,234,567 characters]", true},
		// "é" is 2 bytes, "€" 3, "😀" 4; the marker counts runes.
		{"never splits a 2-byte rune", "aaaaaaaaaé", 10, "aaaaaaaaa\n…[truncated: showed 9 of 10 characters]", true},
		{"never splits a 3-byte rune", "aaaaaaaa€€", 10, "aaaaaaaa\n…[truncated: showed 8 of 10 characters]", true},
		{"never splits a 4-byte rune", "aaaaaaa😀b", 10, "aaaaaaa\n…[truncated: showed 7 of 9 characters]", true},
		{"rune ending at the limit is kept", "aaaaaaa€b", 10, "aaaaaaa€\n…[truncated: showed 8 of 9 characters]", true},
		{"runes counted in the marker", strings.Repeat("日本語", 10), 9,
			"日本語\n…[truncated: showed 3 of 30 characters]", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := m.TruncateTo(tt.content, tt.max)
			if got != tt.want || cut != tt.cut {
				t.Fatalf("TruncateTo(%d) =\n%q, %v\nwant\n%q, %v", tt.max, got, cut, tt.want, tt.cut)
			}
		})
	}
}

func TestTruncateToolResult(t *testing.T) {
	m := mustManager(t, agentctx.Config{TokenLimit: 1000, MaxToolResultShare: 0.25}) // 0.25 × 1000 × 4 = 1000 bytes
	if got, cut := m.TruncateToolResult(strings.Repeat("a", 1000)); cut || len(got) != 1000 {
		t.Fatalf("a result at the limit was cut: %d bytes, %v", len(got), cut)
	}
	got, cut := m.TruncateToolResult(strings.Repeat("a", 5000))
	if !cut || got != strings.Repeat("a", 1000)+"\n…[truncated: showed 1,000 of 5,000 characters]" {
		t.Fatalf("TruncateToolResult = %q, %v", got, cut)
	}

	capped := mustManager(t, agentctx.Config{MaxToolResultChars: 300})
	if got, _ := capped.TruncateToolResult(strings.Repeat("b", 1000)); !strings.HasPrefix(got, strings.Repeat("b", 300)+"\n…") {
		t.Fatalf("MaxToolResultChars not applied: %q", got)
	}
}

// TestTruncateUTF8Property cuts random mixed-script text at every limit and
// checks the result is valid UTF-8, a prefix of the input plus the marker,
// within the limit, and not shorter than the rule allows.
func TestTruncateUTF8Property(t *testing.T) {
	m := mustManager(t, agentctx.Config{})
	rng := rand.New(rand.NewPCG(7, 11))
	pieces := []string{"a", "bc", " ", "\n", "é", "ß", "€", "日本", "😀", "\r\n", "👩‍💻"}
	for range 200 {
		var b strings.Builder
		for range rng.IntN(120) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s := b.String()
		for limit := 0; limit <= len(s)+1; limit++ {
			got, cut := m.TruncateTo(s, limit)
			if !cut {
				if len(s) > limit || got != s {
					t.Fatalf("TruncateTo(%q, %d) = %q, false", s, limit, got)
				}
				continue
			}
			if !utf8.ValidString(got) {
				t.Fatalf("TruncateTo(%q, %d) = %q: invalid UTF-8", s, limit, got)
			}
			i := strings.LastIndex(got, "…[truncated: showed ")
			if i < 0 {
				t.Fatalf("no marker in %q", got)
			}
			kept := strings.TrimSuffix(got[:i], "\n")
			if !strings.HasPrefix(s, kept) || len(kept) > limit {
				t.Fatalf("TruncateTo(%q, %d) kept %q: not a prefix within the limit", s, limit, kept)
			}
			// At worst the cut moves back to a newline in the last 20% (and a
			// CR before it), or back over a rune of at most 4 bytes.
			if minKeep := min(limit-limit/5-1, limit-utf8.UTFMax); len(kept) < minKeep {
				t.Fatalf("TruncateTo(%q, %d) kept only %d bytes", s, limit, len(kept))
			}
		}
	}
}

func TestTruncateToolResults(t *testing.T) {
	m := mustManager(t, agentctx.Config{TokenLimit: 1000, MaxToolResultShare: 0.25}) // single limit 1000, a tenth is 100
	call := llm.ToolCall{ID: "c1", Name: "fetch"}
	in := []llm.Message{
		llm.SystemMessage(strings.Repeat("s", 500)),
		llm.UserMessage(strings.Repeat("u", 500)),
		llm.AssistantMessage(strings.Repeat("a", 500), call),
		llm.ToolResultMessage(call, strings.Repeat("r", 500), true),
		llm.AssistantMessage("short"),
	}
	before := clone(in)

	out := m.TruncateToolResults(in, 0)
	assertUntouched(t, "TruncateToolResults", before, in)
	assertPaired(t, "TruncateToolResults", out)
	if len(out) != len(in) {
		t.Fatalf("len %d, want %d", len(out), len(in))
	}
	for i := range in {
		if i == 3 {
			continue
		}
		if out[i].Content != in[i].Content {
			t.Errorf("message %d (%s) changed", i, in[i].Role)
		}
	}
	want := strings.Repeat("r", 100) + "\n…[truncated: showed 100 of 500 characters]"
	if out[3].Content != want || !out[3].IsError || out[3].ToolCallID != "c1" || out[3].Name != "fetch" {
		t.Fatalf("tool message = %+v", out[3])
	}

	out = m.TruncateToolResults(in, 50)
	if !strings.HasPrefix(out[3].Content, strings.Repeat("r", 50)+"\n…[truncated: showed 50 of") {
		t.Fatalf("explicit maxChars not applied: %q", out[3].Content)
	}
	if got := m.TruncateToolResults(nil, 0); len(got) != 0 {
		t.Fatalf("TruncateToolResults(nil) = %v", got)
	}
}
