package llmtest

import (
	"maps"
	"slices"

	"github.com/valetkit/valet/llm"
)

// TestingT is the part of [testing.TB] a strict [Script] uses: a
// *testing.T, *testing.B or *testing.F, or a fake in a test of a test
// helper.
type TestingT interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// Strict makes the test t fail, when it ends, if the script was not played
// exactly: one error for each call that came after the replies ran out or
// got a reply that did not fit it (see [Script.Err]), e.g.
//
//	llmtest: script exhausted: call 4 had no reply (3 scripted)
//
// and one if replies were left over, e.g.
//
//	llmtest: 2 scripted replies were never used
//
// and one for each purpose given replies with [Script.On] that has some
// left, e.g.
//
//	llmtest: 1 scripted remember_facts reply was never used
//
// A fact extraction runs in the background after a reply: close the
// orchestrator (agent.Orchestrator.Close waits for it) before the test
// ends, so that the check sees its call.
//
// Without it a script one reply short can pass unnoticed: the orchestrator
// gets an error from the model where it can do without one (phrasing a
// question in the persona, say) and falls back quietly. Strict returns s, so
// it chains: llmtest.NewScript(...).Strict(t); see also [NewStrictScript].
func (s *Script) Strict(t TestingT) *Script {
	t.Helper()
	t.Cleanup(func() {
		t.Helper()
		s.mu.Lock()
		problems := append([]error(nil), s.problems...)
		left := []string{}
		if n := len(s.replies) - s.next; n > 0 {
			left = append(left, leftOver(llm.PurposeUnspecified, n))
		}
		for _, p := range slices.Sorted(maps.Keys(s.asides)) {
			if q := s.asides[p]; q.next < len(q.replies) {
				left = append(left, leftOver(p, len(q.replies)-q.next))
			}
		}
		s.mu.Unlock()
		for _, err := range problems {
			t.Errorf("%v", err)
		}
		for _, l := range left {
			t.Errorf("%s", l)
		}
	})
	return s
}

// NewStrictScript returns a Script that answers with replies, in order, and
// fails t when the test ends unless every reply was used and every call had
// a fitting reply; see [Script.Strict].
func NewStrictScript(t TestingT, replies ...Reply) *Script {
	t.Helper()
	return NewScript(replies...).Strict(t)
}
