package openai

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/valetkit/valet/llm"
)

const maxCallsForTest = MaxToolCallsPerReply

func toolCallsChunk(calls string) string {
	return `{"choices":[{"index":0,"delta":{"tool_calls":[` + calls + `]}}]}`
}

const finishToolCalls = `{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`

// streamToolCalls serves a stream of the given chunks, then a finish and
// [DONE], and returns what the client assembled.
func streamToolCalls(t *testing.T, max int64, chunks []string) (*llm.Response, error) {
	t.Helper()
	c, _ := serveCapped(t, max, func(w http.ResponseWriter, r *http.Request) {
		sse(w, append(append(chunks, finishToolCalls), "[DONE]")...)
	})
	return llm.Collect(c.Stream(t.Context(), userReq("hi")))
}

// checkTooManyCalls: the error of a reply with more tool calls than
// MaxToolCallsPerReply.
func checkTooManyCalls(t *testing.T, err error) {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *llm.Error", err, err)
	}
	if !errors.Is(err, ErrTooManyToolCalls) || !errors.Is(err, ErrResponseTooLarge) || llm.IsRetryable(err) || e.Kind != llm.KindUnknown {
		t.Errorf("error %v: kind %v, retryable %v, Is(ErrTooManyToolCalls) %v", err, e.Kind, llm.IsRetryable(err), errors.Is(err, ErrTooManyToolCalls))
	}
	if !strings.Contains(e.Message, fmt.Sprint(maxCallsForTest)) || !strings.Contains(e.Message, "tool calls") {
		t.Errorf("message %q should say the reply has too many tool calls", e.Message)
	}
}

// TestStreamToolCallIDsCounted: tool-call ids count toward
// MaxResponseBytes. 20 calls each with a 60 KiB id (every line under the
// 64 KiB cap) used to assemble 1.2 MB of ids without an error.
func TestStreamToolCallIDsCounted(t *testing.T) {
	id := strings.Repeat("x", 60<<10)
	var chunks []string
	for i := range 20 {
		chunks = append(chunks, toolCallsChunk(fmt.Sprintf(`{"index":%d,"id":"%s%d","type":"function","function":{"name":"f","arguments":"{}"}}`, i, id, i)))
	}
	resp, err := streamToolCalls(t, smallCap, chunks)
	if err == nil {
		t.Fatalf("assembled %d calls with 60 KiB ids under a %d-byte cap", len(resp.Message.ToolCalls), smallCap)
	}
	checkTooLarge(t, err, smallCap)
}

// TestStreamToolCallsCostBytes: each call opened costs a fixed number of
// bytes, so index-only deltas (which carry no id, name or arguments) cannot
// open calls for free. 1,000 calls in chunks of 100 stay under
// MaxToolCallsPerReply per chunk but not under a 32 KiB cap.
func TestStreamToolCallsCostBytes(t *testing.T) {
	const max = 32 << 10
	var chunks []string
	for ev := range 10 {
		var b strings.Builder
		for i := range 100 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"index":%d}`, ev*100+i)
		}
		chunks = append(chunks, toolCallsChunk(b.String()))
	}
	resp, err := streamToolCalls(t, max, chunks)
	if err == nil {
		t.Fatalf("assembled %d empty calls", len(resp.Message.ToolCalls))
	}
	if !errors.Is(err, ErrResponseTooLarge) || llm.IsRetryable(err) {
		t.Fatalf("error %v", err)
	}
}

// TestStreamToolCallCount: a stream may open at most MaxToolCallsPerReply
// calls, whether they come one per chunk or many in one chunk, under the
// default byte cap.
func TestStreamToolCallCount(t *testing.T) {
	call := func(i int) string {
		return fmt.Sprintf(`{"index":%d,"id":"call_%d","type":"function","function":{"name":"f","arguments":"{}"}}`, i, i)
	}
	for _, n := range []int{maxCallsForTest, maxCallsForTest + 1, 60000} {
		var apart, together []string
		for i := range n {
			apart = append(apart, toolCallsChunk(call(i)))
			together = append(together, call(i))
		}
		for name, chunks := range map[string][]string{
			"apart":    apart,
			"together": {toolCallsChunk(strings.Join(together, ","))},
		} {
			t.Run(fmt.Sprintf("%d/%s", n, name), func(t *testing.T) {
				resp, err := streamToolCalls(t, 0, chunks)
				if n <= maxCallsForTest {
					if err != nil || len(resp.Message.ToolCalls) != n {
						t.Fatalf("%d calls: err %v", n, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("assembled %d calls", len(resp.Message.ToolCalls))
				}
				checkTooManyCalls(t, err)
			})
		}
	}
}

// TestCompleteToolCallCount: a non-streamed reply (and a whole reply to a
// streamed request) may hold at most MaxToolCallsPerReply calls.
func TestCompleteToolCallCount(t *testing.T) {
	for _, n := range []int{maxCallsForTest, maxCallsForTest + 1, 100000} {
		calls := make([]string, n)
		for i := range calls {
			calls[i] = `{}`
		}
		body := `{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","tool_calls":[` + strings.Join(calls, ",") + `]}}]}`
		c := serve(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, body)
		})
		for name, do := range map[string]func() (*llm.Response, error){
			"complete": func() (*llm.Response, error) { return c.Complete(t.Context(), userReq("hi")) },
			"stream":   func() (*llm.Response, error) { return llm.Collect(c.Stream(t.Context(), userReq("hi"))) },
		} {
			t.Run(fmt.Sprintf("%d/%s", n, name), func(t *testing.T) {
				resp, err := do()
				if n <= maxCallsForTest {
					if err != nil || len(resp.Message.ToolCalls) != n {
						t.Fatalf("%d calls: err %v", n, err)
					}
					return
				}
				if err == nil {
					t.Fatalf("assembled %d calls", len(resp.Message.ToolCalls))
				}
				checkTooManyCalls(t, err)
			})
		}
	}
}
