package llmtest

import (
	"fmt"

	"github.com/valetkit/valet/llm"
)

// The tools of the orchestrator's memory calls, spelled out like those in
// approvals.go; a test checks they match agent.RememberToolName and
// agent.CompactToolName.
const (
	rememberToolName = "remember_facts"
	compactToolName  = "compact_conversation"
)

// Fact is one durable fact in a [Remember] or [Summary] reply, as the
// orchestrator's remember_facts and compact_conversation tools take it.
type Fact struct {
	// Text is one short sentence about the user, in the third person,
	// e.g. "The user's dentist is Dr. Kim.".
	Text string `json:"text"`
	// Kind is one of "fact", "preference", "person", "date" or "other";
	// empty means "fact".
	Kind string `json:"kind"`
	// Supersedes is the id of a known fact (a recalled memory.Item) this
	// one replaces; empty for none.
	Supersedes string `json:"supersedes,omitempty"`
}

// rememberNothing answers an unscripted fact extraction of a script made
// with NewScript: it remembers nothing.
var rememberNothing = Remember()

// Remember returns a reply to the orchestrator's fact extraction
// (agent.MemoryOptions.Extract; [llm.PurposeRememberFacts]): a call of its
// forced remember_facts tool with facts, none for "nothing worth
// keeping". Give it to the extraction calls with [Script.On]:
//
//	model.On(llm.PurposeRememberFacts, llmtest.Remember(llmtest.Fact{Text: "The user lives in Oslo."}))
//
// The call fails with [ErrReplyMismatch] when the request has no
// remember_facts tool.
func Remember(facts ...Fact) Reply {
	return Reply{build: func(req llm.Request) (Reply, error) {
		if _, ok := findTool(req, rememberToolName); !ok {
			return Reply{}, fmt.Errorf("Remember: the request has no %s tool, so it is not a fact extraction (%s)", rememberToolName, describeTools(req))
		}
		return Calls(Call(rememberToolName, factArgs{Facts: withKinds(facts)})), nil
	}}
}

// Summary returns a reply to the orchestrator's compaction call
// (agent.LoopConfig.CompactThreshold; [llm.PurposeCompact]): a call of its
// forced compact_conversation tool with the summary that replaces the
// older messages and the facts to remember from them:
//
//	model.On(llm.PurposeCompact, llmtest.Summary("The user planned a trip to Oslo.", llmtest.Fact{Text: "The user lives in Bergen."}))
//
// The call fails with [ErrReplyMismatch] when the request has no
// compact_conversation tool. An empty summary makes the orchestrator
// keep the history as it was (it trims it instead).
func Summary(text string, facts ...Fact) Reply {
	return Reply{build: func(req llm.Request) (Reply, error) {
		if _, ok := findTool(req, compactToolName); !ok {
			return Reply{}, fmt.Errorf("Summary: the request has no %s tool, so it is not a compaction (%s)", compactToolName, describeTools(req))
		}
		return Calls(Call(compactToolName, summaryArgs{Summary: text, Facts: withKinds(facts)})), nil
	}}
}

type factArgs struct {
	Facts []Fact `json:"facts"`
}

type summaryArgs struct {
	Summary string `json:"summary"`
	Facts   []Fact `json:"facts"`
}

// withKinds returns facts with empty kinds set to "fact", never nil (the
// tools require the list).
func withKinds(facts []Fact) []Fact {
	out := make([]Fact, len(facts))
	for i, f := range facts {
		if f.Kind == "" {
			f.Kind = "fact"
		}
		out[i] = f
	}
	return out
}
