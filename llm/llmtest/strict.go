package llmtest

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
		left := len(s.replies) - s.next
		s.mu.Unlock()
		for _, err := range problems {
			t.Errorf("%v", err)
		}
		switch {
		case left == 1:
			t.Errorf("llmtest: 1 scripted reply was never used")
		case left > 1:
			t.Errorf("llmtest: %d scripted replies were never used", left)
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
