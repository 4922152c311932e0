package llmtest_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/valetkit/valet/agent"
	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/llm/llmtest"
)

// rememberReq and compactReq are the orchestrator's memory calls as a
// Script receives them, named with the orchestrator's own constants.
var (
	rememberReq = llm.Request{Messages: []llm.Message{llm.UserMessage("turn")}, Purpose: llm.PurposeRememberFacts,
		Tools: []llm.ToolSpec{{Name: agent.RememberToolName}}, ToolChoice: agent.RememberToolName}
	compactReq = llm.Request{Messages: []llm.Message{llm.UserMessage("transcript")}, Purpose: llm.PurposeCompact,
		Tools: []llm.ToolSpec{{Name: agent.CompactToolName}}, ToolChoice: agent.CompactToolName}
	loopReq = llm.Request{Messages: []llm.Message{llm.UserMessage("hi")}, Purpose: llm.PurposeLoop}
)

// call returns the one tool call of s's answer to req, failing t otherwise.
func call(t *testing.T, s *llmtest.Script, req llm.Request) llm.ToolCall {
	t.Helper()
	resp, err := s.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Message.ToolCalls) != 1 {
		t.Fatalf("answer %+v, want one tool call", resp.Message)
	}
	return resp.Message.ToolCalls[0]
}

func text(t *testing.T, s *llmtest.Script, req llm.Request) string {
	t.Helper()
	resp, err := s.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Message.Content
}

// Calls of a purpose given replies with On take them in their own order,
// whenever they come; the others keep the replies given to NewScript.
func TestOnAnswersAPurposeApart(t *testing.T) {
	s := llmtest.NewStrictScript(t, llmtest.Text("first"), llmtest.Text("second")).
		On(llm.PurposeRememberFacts,
			llmtest.Remember(llmtest.Fact{Text: "The user's dentist is Dr. Kim.", Kind: "person"}),
			llmtest.Remember(llmtest.Fact{Text: "The user lives in Oslo.", Supersedes: "7"}),
		)
	if got := text(t, s, loopReq); got != "first" {
		t.Fatalf("loop call 1 = %q", got)
	}
	if c := call(t, s, rememberReq); c.Name != agent.RememberToolName || string(c.Arguments) != `{"facts":[{"text":"The user's dentist is Dr. Kim.","kind":"person"}]}` {
		t.Fatalf("remember call 1 = %s %s", c.Name, c.Arguments)
	}
	if c := call(t, s, rememberReq); string(c.Arguments) != `{"facts":[{"text":"The user lives in Oslo.","kind":"fact","supersedes":"7"}]}` {
		t.Fatalf("remember call 2 = %s", c.Arguments)
	}
	if got := text(t, s, loopReq); got != "second" {
		t.Fatalf("loop call 2 = %q", got)
	}
	if s.Remaining() != 0 || s.Err() != nil {
		t.Fatalf("Remaining %d, Err %v", s.Remaining(), s.Err())
	}
}

// A strict script checks each purpose's replies apart: a call after they
// ran out names its purpose, and those left over are reported per purpose.
func TestStrictChecksEachPurpose(t *testing.T) {
	ft := &fakeT{}
	s := llmtest.NewStrictScript(ft, llmtest.Text("a"), llmtest.Text("b")).
		On(llm.PurposeRememberFacts, llmtest.Remember()).
		On(llm.PurposeCompact, llmtest.Summary("one"), llmtest.Summary("two"), llmtest.Summary("three"))
	for _, req := range []llm.Request{rememberReq, loopReq, rememberReq, compactReq} {
		_, _ = s.Complete(t.Context(), req)
	}
	want := []string{
		"llmtest: script exhausted: call 3 (remember_facts call 2) had no reply (1 scripted)",
		"llmtest: 1 scripted reply was never used",
		"llmtest: 2 scripted compact replies were never used",
	}
	if got := ft.end(); !slices.Equal(got, want) {
		t.Fatalf("reported\n%q\nwant\n%q", got, want)
	}
}

// A script made with NewScript answers a fact extraction nobody scripted
// with no facts, without taking a reply meant for the conversation and
// without failing a strict test; a NewScriptFunc function gets it.
func TestUnscriptedFactExtractionRemembersNothing(t *testing.T) {
	ft := &fakeT{}
	s := llmtest.NewStrictScript(ft, llmtest.Text("a"))
	if c := call(t, s, rememberReq); c.Name != agent.RememberToolName || string(c.Arguments) != `{"facts":[]}` {
		t.Fatalf("unscripted extraction answered %s %s", c.Name, c.Arguments)
	}
	if got := text(t, s, loopReq); got != "a" {
		t.Fatalf("loop call = %q", got)
	}
	if got := ft.end(); len(got) != 0 {
		t.Fatalf("reported %q", got)
	}

	var seen []llm.Purpose
	f := llmtest.NewScriptFunc(func(req llm.Request) llmtest.Reply {
		seen = append(seen, req.Purpose)
		return llmtest.Remember(llmtest.Fact{Text: "x"})
	})
	if c := call(t, f, rememberReq); !strings.Contains(string(c.Arguments), `"x"`) || !slices.Equal(seen, []llm.Purpose{llm.PurposeRememberFacts}) {
		t.Fatalf("the function was not asked: %s, %v", c.Arguments, seen)
	}
}

// Any other call without replies of its own takes the next positional
// reply; with none left the error names its purpose.
func TestExhaustedNamesThePurpose(t *testing.T) {
	s := llmtest.NewScript()
	_, err := s.Complete(t.Context(), llm.Request{Messages: loopReq.Messages, Purpose: llm.PurposePhrase})
	if !errors.Is(err, llmtest.ErrScriptExhausted) || err.Error() != "llmtest: script exhausted: call 1 (phrase) had no reply (0 scripted)" {
		t.Fatalf("err = %v", err)
	}
}

// Summary answers the compaction call with the orchestrator's tool; each
// helper fails, never guesses, on a request it does not fit.
func TestSummaryAndRememberFitTheirCall(t *testing.T) {
	s := llmtest.NewScript().On(llm.PurposeCompact, llmtest.Summary("The user planned a trip.", llmtest.Fact{Text: "The user lives in Bergen."}))
	if c := call(t, s, compactReq); c.Name != agent.CompactToolName ||
		string(c.Arguments) != `{"summary":"The user planned a trip.","facts":[{"text":"The user lives in Bergen.","kind":"fact"}]}` {
		t.Fatalf("compaction answered %s %s", c.Name, c.Arguments)
	}
	for _, tt := range []struct {
		reply llmtest.Reply
		req   llm.Request
		want  string
	}{
		{llmtest.Remember(), loopReq, "call 1 (loop): Remember: the request has no remember_facts tool, so it is not a fact extraction (it has no tools)"},
		{llmtest.Summary("s"), rememberReq, `call 1 (remember_facts): Summary: the request has no compact_conversation tool, so it is not a compaction (its tools: remember_facts; tool choice "remember_facts")`},
	} {
		s := llmtest.NewScript().On(tt.req.Purpose, tt.reply)
		_, err := s.Complete(t.Context(), tt.req)
		if !errors.Is(err, llmtest.ErrReplyMismatch) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("err = %v\nwant it to contain %q", err, tt.want)
		}
	}
}

func TestOnNeedsAPurpose(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("On(PurposeUnspecified) did not panic")
		}
	}()
	llmtest.NewScript().On(llm.PurposeUnspecified, llmtest.Text("x"))
}

// Over the wire, where Purpose is not sent, the Server gives a request
// forcing one of valet's aside tools that call's purpose, so by-purpose
// scripts work end to end.
func TestServerGivesForcedCallsTheirPurpose(t *testing.T) {
	model := llmtest.NewStrictScript(t, llmtest.Text("Hello.")).
		On(llm.PurposeRememberFacts, llmtest.Remember(llmtest.Fact{Text: "The user likes jazz."}))
	srv := llmtest.NewServer(model)
	defer srv.Close()
	forced := func(name string) map[string]any {
		return map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "x"}},
			"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": name, "parameters": map[string]any{"type": "object"}}}},
			"tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": name}}}
	}
	for _, body := range []any{forced(agent.RememberToolName), map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}} {
		if resp := post(t, srv, body); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	var got []llm.Purpose
	for _, r := range srv.Requests() {
		got = append(got, r.Request.Purpose)
	}
	if !slices.Equal(got, []llm.Purpose{llm.PurposeRememberFacts, llm.PurposeUnspecified}) {
		t.Fatalf("purposes %q", got)
	}
	reqs := model.Requests()
	if len(reqs) != 2 || reqs[0].Purpose != llm.PurposeRememberFacts {
		t.Fatalf("the script got %+v", reqs)
	}
	// The other forced tools of valet's aside calls.
	for name, want := range map[string]llm.Purpose{approval.ResolveToolName: llm.PurposeResolveApprovals,
		agent.ProvideFieldsToolName: llm.PurposeProvideFields, agent.CompactToolName: llm.PurposeCompact} {
		s := llmtest.NewScript().On(want, llmtest.Text("ok"))
		srv := llmtest.NewServer(s)
		resp := post(t, srv, forced(name))
		srv.Close()
		if resp.StatusCode != 200 || s.Requests()[0].Purpose != want {
			t.Errorf("%s: status %d, purpose %q", name, resp.StatusCode, s.Requests()[0].Purpose)
		}
	}
}
