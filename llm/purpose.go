package llm

// Purpose says what a model call is for. valet's orchestrator sets it on
// every [Request] it makes: the calls of its tool-calling loop, and the
// calls it makes aside (phrasing a question to the user, reading the
// user's answer to pending approvals or missing fields, compacting the
// history, extracting facts to remember).
//
// It is a label for the caller's side only: a [Client] never sends it to
// the model (github.com/valetkit/valet/llm/openai leaves it out of the
// request body). Test doubles script calls by it
// (github.com/valetkit/valet/llm/llmtest: Script.On), and it is the hook
// observability uses to tell the calls of a run apart: a wrapper around a
// Client (for metrics, tracing or logs) reads it from the request.
//
// The zero value, [PurposeUnspecified], is a call that does not say: one a
// host makes itself, or one made through a Client by code other than
// valet's orchestrator.
type Purpose string

// The purposes of the calls valet makes. Those that force one of valet's
// tools carry its name (see the agent package's documentation for the
// arguments of each).
const (
	// PurposeUnspecified is a call that does not say what it is for.
	PurposeUnspecified Purpose = ""
	// PurposeLoop is a turn of the tool-calling loop: the model sees the
	// conversation and the tools, and answers or calls tools.
	PurposeLoop Purpose = "loop"
	// PurposeFinal is the answer without tools the loop asks for when it
	// cannot go on: out of turns (LoopConfig.MaxTurns) or out of budget.
	PurposeFinal Purpose = "final"
	// PurposePhrase is the reply, without tools, that puts what waiting
	// Agent-Tools need (missing fields, approvals) to the user in the
	// assistant's voice.
	PurposePhrase Purpose = "phrase"
	// PurposeResolveApprovals reads the user's reply to pending approvals;
	// it forces the resolve_approvals tool.
	PurposeResolveApprovals Purpose = "resolve_approvals"
	// PurposeProvideFields reads the fields a waiting Agent-Tool is missing
	// from the user's reply; it forces the provide_fields tool.
	PurposeProvideFields Purpose = "provide_fields"
	// PurposeCompact summarises the older part of a conversation and the
	// facts in it; it forces the compact_conversation tool.
	PurposeCompact Purpose = "compact"
	// PurposeRememberFacts extracts the durable facts of a turn, in the
	// background after the reply; it forces the remember_facts tool.
	PurposeRememberFacts Purpose = "remember_facts"
	// PurposeRoute classifies a user's message that arrives while the
	// conversation's loop runs (agent.LoopConfig.RouteWhileRunning): the
	// model answers one word, correction, stop, pause or new.
	PurposeRoute Purpose = "route"
)
