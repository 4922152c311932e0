package llmtest

import (
	"testing"

	"github.com/valetkit/valet/llm"
)

// TestScriptFuncPanics: a reply function that panics (or calls t.FailNow,
// which runs deferred calls the same way) must leave the Script usable and
// must not turn into "fatal error: sync: unlock of unlocked mutex", which
// kills the test binary and hides the original panic.
func TestScriptFuncPanics(t *testing.T) {
	calls := 0
	s := NewScriptFunc(func(req llm.Request) Reply {
		calls++
		if calls == 1 {
			panic("boom")
		}
		return Text("ok")
	})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the reply function's panic", r)
			}
		}()
		_, _ = s.Complete(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	}()
	resp, err := s.Complete(t.Context(), llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}})
	if err != nil || resp.Message.Content != "ok" || s.Calls() != 2 {
		t.Fatalf("%v %+v calls=%d", err, resp, s.Calls())
	}
}
