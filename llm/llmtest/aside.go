package llmtest

import (
	"fmt"

	"github.com/valetkit/valet/llm"
)

// queue holds the replies [Script.On] gave one purpose.
type queue struct {
	replies []Reply
	next    int // the next reply to give
	calls   int // calls of the purpose so far
}

// On gives the calls whose [llm.Request.Purpose] is p replies of their
// own, in order, and returns s so that it chains:
//
//	model := llmtest.NewStrictScript(t, llmtest.Text("Noted."), llmtest.Text("Dr. Kim."))
//	model.On(llm.PurposeRememberFacts,
//		llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"}),
//		llmtest.Remember(),
//	)
//
// A call of p then never takes a reply given to NewScript, nor goes to a
// [NewScriptFunc] function: the other calls keep their order whatever
// the calls of p do, which matters for a call made in the background
// (fact extraction runs after the reply, racing the next message). Calls
// on p add to the replies it has. A call of p after its replies ran out
// fails with [ErrScriptExhausted] ("llmtest: script exhausted: call 7
// (remember_facts call 3) had no reply (2 scripted)"),
// and a strict script reports p's replies left over on their own line
// ("llmtest: 1 scripted remember_facts reply was never used").
//
// Any purpose may be given replies this way, [llm.PurposeLoop] too; p
// must not be [llm.PurposeUnspecified] (On panics, as for a mistake in
// writing the test).
func (s *Script) On(p llm.Purpose, replies ...Reply) *Script {
	if p == llm.PurposeUnspecified {
		panic("llmtest: Script.On needs a purpose; replies for calls that give none go to NewScript")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.asides == nil {
		s.asides = make(map[llm.Purpose]*queue)
	}
	q := s.asides[p]
	if q == nil {
		q = &queue{}
		s.asides[p] = q
	}
	q.replies = append(q.replies, replies...)
	return s
}

// purposeNote names a call's purpose in an error, e.g. " (phrase)".
func purposeNote(p llm.Purpose) string {
	if p == llm.PurposeUnspecified {
		return ""
	}
	return " (" + string(p) + ")"
}

// leftOver describes n replies never used, of purpose p or, for
// PurposeUnspecified, the replies given to NewScript.
func leftOver(p llm.Purpose, n int) string {
	what := "scripted"
	if p != llm.PurposeUnspecified {
		what += " " + string(p)
	}
	if n == 1 {
		return fmt.Sprintf("llmtest: 1 %s reply was never used", what)
	}
	return fmt.Sprintf("llmtest: %d %s replies were never used", n, what)
}

// forcedPurpose is the purpose of a request that arrived over the wire,
// which does not carry llm.Request.Purpose: the aside call that forces
// one of valet's tools, or unspecified.
func forcedPurpose(choice llm.ToolChoice) llm.Purpose {
	switch choice {
	case resolveToolName:
		return llm.PurposeResolveApprovals
	case provideFieldsToolName:
		return llm.PurposeProvideFields
	case compactToolName:
		return llm.PurposeCompact
	case rememberToolName:
		return llm.PurposeRememberFacts
	}
	return llm.PurposeUnspecified
}
