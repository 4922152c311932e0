package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm/llmtest"
)

// TestRealModeBothKeysFallsBackToClaude runs the demo with both keys set
// while the OpenAI endpoint is overloaded: Claude answers, through the
// fallback chain, and no key is printed.
func TestRealModeBothKeysFallsBackToClaude(t *testing.T) {
	down := llmtest.NewServer(llmtest.NewScript(), llmtest.WithAPIKey("sk-test-openai-secret"))
	defer down.Close()
	for range 100 {
		down.Inject(llmtest.Overloaded())
	}
	claude := llmtest.NewAnthropicServer(demoModel(), llmtest.WithAPIKey("sk-ant-test-secret"))
	defer claude.Close()
	t.Setenv("OPENAI_API_KEY", "sk-test-openai-secret")
	t.Setenv("OPENAI_BASE_URL", down.URL)
	t.Setenv("OPENAI_MODEL", "gpt-test")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test-secret")
	t.Setenv("ANTHROPIC_BASE_URL", claude.URL)
	t.Setenv("ANTHROPIC_MODEL", "claude-test")

	var out bytes.Buffer
	if err := run(context.Background(), &out, options{}); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"model: gpt-test at " + down.URL,
		"fallback model: claude-test at " + claude.URL,
		"bot> Each of you pays €202.50",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q\n%s", want, got)
		}
	}
	if len(down.Requests()) == 0 {
		t.Error("OpenAI was never asked")
	}
	if strings.Contains(got, "test-secret") || strings.Contains(got, "openai-secret") {
		t.Error("an API key was printed")
	}
}
