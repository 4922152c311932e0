package anthropic

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/valetkit/valet/llm"
)

// replay returns a client whose server answers every request with the
// fixture file, with status and content type.
func replay(t *testing.T, file string, status int, contentType string, header ...string) *Client {
	t.Helper()
	body, err := os.ReadFile("testdata/" + file)
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
}

func argsEqual(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var x, y any
	if json.Unmarshal(got, &x) != nil || json.Unmarshal([]byte(want), &y) != nil || !reflect.DeepEqual(x, y) {
		t.Errorf("arguments %s, want %s", got, want)
	}
}

func TestFixtureMessageWithParallelToolUse(t *testing.T) {
	c := replay(t, "message_tool_use.json", 200, "application/json")
	resp, err := c.Complete(t.Context(), hi)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.Message
	if m.Role != llm.RoleAssistant || m.Content != "I'll check the weather in both cities." || len(m.ToolCalls) != 2 ||
		resp.FinishReason != "tool_calls" || resp.Model != "claude-sonnet-4-5-20250929" {
		t.Fatalf("%+v", resp)
	}
	if m.ToolCalls[0].ID != "toolu_01A09q90qw90lq917835lq9" || m.ToolCalls[1].ID != "toolu_01B19q90qw90lq917835lq8" || m.ToolCalls[1].Name != "get_weather" {
		t.Errorf("calls %+v", m.ToolCalls)
	}
	argsEqual(t, m.ToolCalls[1].Arguments, `{"location":"New York, NY","unit":"celsius"}`)
	// input_tokens excludes the cached part; llm.Usage.InputTokens includes it.
	want := llm.Usage{InputTokens: 42 + 2051, OutputTokens: 138, CacheReadTokens: 2051}
	if resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
}

func TestFixtureStreamWithInputJSONDelta(t *testing.T) {
	c := replay(t, "stream_tool_use.sse", 200, "text/event-stream")
	var text []string
	var final *llm.Response
	for ch, err := range c.Stream(t.Context(), hi) {
		if err != nil {
			t.Fatal(err)
		}
		if ch.Response != nil {
			final = ch.Response
		} else {
			text = append(text, ch.Text)
		}
	}
	if strings.Join(text, "|") != "Okay|, let's check the weather for San Francisco, CA:" {
		t.Errorf("text chunks %q", text)
	}
	if final == nil || final.Message.Content != "Okay, let's check the weather for San Francisco, CA:" ||
		len(final.Message.ToolCalls) != 1 || final.FinishReason != "tool_calls" {
		t.Fatalf("final %+v", final)
	}
	tc := final.Message.ToolCalls[0]
	if tc.ID != "toolu_01T1x1fJ34qAmk2tNTrN7Up6" || tc.Name != "get_weather" {
		t.Errorf("call %+v", tc)
	}
	argsEqual(t, tc.Arguments, `{"location":"San Francisco, CA","unit":"fahrenheit"}`)
	want := llm.Usage{InputTokens: 472 + 1203, OutputTokens: 89, CacheWriteTokens: 1203}
	if final.Usage != want {
		t.Errorf("usage %+v, want %+v", final.Usage, want)
	}
}

// A stream that ends cleanly inside a tool_use block (a proxy closing the
// connection) is KindUnavailable, and no half tool call comes out.
func TestFixtureStreamCutInToolUse(t *testing.T) {
	c := replay(t, "stream_cut_in_tool_use.sse", 200, "text/event-stream")
	var err error
	for ch, e := range c.Stream(t.Context(), hi) {
		if e != nil {
			err = e
			break
		}
		if ch.Response != nil {
			t.Fatalf("a final response from a cut stream: %+v", ch.Response)
		}
	}
	if llm.KindOf(err) != llm.KindUnavailable || !llm.IsRetryable(err) {
		t.Fatalf("%v (kind %v)", err, llm.KindOf(err))
	}
}

func TestFixtureErrorBodies(t *testing.T) {
	cases := []struct {
		file   string
		status int
		header []string
		check  func(e *llm.Error) bool
	}{
		{"error_overloaded.json", 529, nil, func(e *llm.Error) bool {
			return e.Kind == llm.KindUnavailable && e.Code == "overloaded_error" && e.Message == "Overloaded"
		}},
		{"error_prompt_too_long.json", 400, nil, func(e *llm.Error) bool {
			return e.Kind == llm.KindContextOverflow && e.ContextUsed == 214617 && e.ContextLimit == 200000
		}},
		{"error_rate_limit.json", 429, []string{"retry-after", "24"}, func(e *llm.Error) bool {
			return e.Kind == llm.KindRateLimited && e.RetryAfter == 24*time.Second && strings.HasPrefix(e.Message, "This request would exceed")
		}},
	}
	for _, tc := range cases {
		c := replay(t, tc.file, tc.status, "application/json", tc.header...)
		_, err := c.Complete(t.Context(), hi)
		var e *llm.Error
		if !errors.As(err, &e) || !tc.check(e) {
			t.Errorf("%s: %#v", tc.file, err)
		}
	}
}
