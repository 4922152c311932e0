package agent

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/valetkit/valet/approval"
	"github.com/valetkit/valet/llm"
	"github.com/valetkit/valet/memory"
	"github.com/valetkit/valet/tool"
)

// Observer hears every step of every run (Config.Observer): what Stream
// yields to a user and what it never does — each model request and
// response, retries, tool calls and results, approvals raised and
// decided, compactions, recall, notes to the model, spend refusals.
//
// Observe is called on the run's own goroutine, in the order the steps
// happen, and the run waits for it: it must return quickly, like a
// slog.Handler. An observer that does I/O or may block is wrapped in
// NewAsyncObserver, which queues copies of the steps and never holds a
// run up. Runs of different conversations call Observe at the same time,
// and so do a run and its sub-agents (Step.Path), so it must be safe for
// concurrent use.
//
// A Step refers to the run's data (the messages sent, the response, the
// Result) instead of copying it, so an observer that ignores a step costs
// only the call: it must not modify what a Step refers to, nor keep it
// after Observe returns (copy what it keeps, as NewAsyncObserver does).
// Steps carry text as the model and the tools wrote it, secrets included
// where they wrote them: an observer that writes steps out redacts them
// (RedactText, RedactArguments), as the transcript does.
//
// A panic in Observe is recovered; the first is logged (Config.Logger)
// and the run goes on.
type Observer interface {
	Observe(ctx context.Context, s Step)
}

// ObserverFunc is an Observer that is a function.
type ObserverFunc func(ctx context.Context, s Step)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, s Step) { f(ctx, s) }

// StepKind says what a Step is. Kinds will be added (sub-agents, risk
// decisions, steering): an observer ignores the kinds it does not know.
type StepKind uint8

// The kinds of Step. The fields each sets are listed beside it; every
// step sets Kind, Seq, Time and the run's RunID, TenantID and
// ConversationID.
const (
	// StepRunStart: a run begins (Message).
	StepRunStart StepKind = iota + 1
	// StepRunEnd: the run ended (Result, Err, Duration). It is the run's
	// last step but for the model call of its background fact extraction
	// (MemoryOptions.Extract), whose request and response (or the
	// SpendGuard's refusal) follow it.
	StepRunEnd
	// StepModelRequest: a model call is sent (Call, Request). Each
	// attempt of a retried call is a request of its own.
	StepModelRequest
	// StepModelResponse: a model call ended (Call, Request.Purpose,
	// Response or Err, Duration).
	StepModelResponse
	// StepModelRetry: a failed model call is tried again (Call: the
	// failed one, Retry, ErrorKind, Err, Delay).
	StepModelRetry
	// StepToolCall: a tool or Agent-Tool call begins (ToolCall).
	StepToolCall
	// StepToolResult: a call ended (ToolCall, Record, Text: the result
	// the model reads, Err: the tool's error, Duration).
	StepToolResult
	// StepApprovalRaised: an Agent-Tool waits for the user's approval
	// (Approval).
	StepApprovalRaised
	// StepApprovalDecided: a pending approval was decided, or expired
	// (Decided).
	StepApprovalDecided
	// StepCompaction: older history was folded into a summary (Text: the
	// summary, Count: the messages folded).
	StepCompaction
	// StepRecall: long-term items were recalled into the system prompt
	// (Recalled, with their scores).
	StepRecall
	// StepNote: valet added a note for the model to the window (Text): a
	// budget wrap-up, a cap on tool calls, the last call of a run.
	StepNote
	// StepContextShortened: a request over the model's context window was
	// shortened (Text: the defence, Count: messages after).
	StepContextShortened
	// StepSpendRefused: the SpendGuard refused the run before any model
	// call (Text: the reason shown to the user, Err); after StepRunEnd,
	// it refused the run's fact extraction (Request.Purpose
	// llm.PurposeRememberFacts), which is skipped.
	StepSpendRefused
	// StepModelFallback: a model call moved from a model that failed to
	// the next of an llm.Fallback (Call, From, To, ErrorKind, Err). The
	// call's StepModelResponse follows, from the model that answered.
	StepModelFallback
	// StepPlan: an update_plan call changed the conversation's plan
	// (ToolCall; Text: the plan as markdown, Plan.Markdown). See
	// Config.Plan.
	StepPlan
	// StepDoomLoop: the run was found going round in circles
	// (LoopConfig.DoomWindow): Text is the note added for the model, or
	// the last call's when the run is stopped (ErrDoomLoop); Count is
	// the intervention (1, 2, ...).
	StepDoomLoop
	// StepRisk: a plain tool call was classified before it ran, by
	// LoopConfig.RiskPolicy or by a declared risk above low (ToolCall;
	// Risk: its risk; RiskDecision: what became of it; Err: the risk
	// policy's error or panic, when it failed). A call of a low-risk tool
	// without a RiskPolicy has none.
	StepRisk
	// StepInject: the loop took a message injected while it ran
	// (Orchestrator.Inject) at a turn boundary (Text: the user's text).
	StepInject
	// StepCancel: Orchestrator.Cancel stopped the run.
	StepCancel
	// StepPause: Orchestrator.Pause stopped the run at a turn boundary.
	StepPause
)

var stepNames = [...]string{
	StepRunStart:         "run_start",
	StepRunEnd:           "run_end",
	StepModelRequest:     "model_request",
	StepModelResponse:    "model_response",
	StepModelRetry:       "model_retry",
	StepToolCall:         "tool_call",
	StepToolResult:       "tool_result",
	StepApprovalRaised:   "approval_raised",
	StepApprovalDecided:  "approval_decided",
	StepCompaction:       "compaction",
	StepRecall:           "recall",
	StepNote:             "note",
	StepContextShortened: "context_shortened",
	StepSpendRefused:     "spend_refused",
	StepModelFallback:    "model_fallback",
	StepPlan:             "plan",
	StepDoomLoop:         "doom_loop",
	StepRisk:             "risk",
	StepInject:           "inject",
	StepCancel:           "cancel",
	StepPause:            "pause",
}

// String is the kind's snake_case name ("model_request").
func (k StepKind) String() string {
	if int(k) < len(stepNames) && stepNames[k] != "" {
		return stepNames[k]
	}
	return "step_" + strconv.Itoa(int(k))
}

// MarshalText writes String.
func (k StepKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (k *StepKind) UnmarshalText(b []byte) error {
	for i, n := range stepNames {
		if n != "" && n == string(b) {
			*k = StepKind(i)
			return nil
		}
	}
	if n, ok := parseStepN(string(b)); ok {
		*k = StepKind(n)
		return nil
	}
	return fmt.Errorf("agent: unknown step kind %q", b)
}

func parseStepN(s string) (uint8, bool) {
	const p = "step_"
	if len(s) <= len(p) || s[:len(p)] != p {
		return 0, false
	}
	n, err := strconv.ParseUint(s[len(p):], 10, 8)
	return uint8(n), err == nil
}

// Step is one step of a run, for an Observer. Which fields are set
// depends on Kind (see the StepKind constants); the others are zero.
type Step struct {
	Kind StepKind
	// Seq is the step's place in its run: 1, 2, 3, ...
	Seq  int
	Time time.Time
	// The run: Result.RunID, and the message's tenant and conversation.
	RunID, TenantID, ConversationID string

	// Message is the message the run handles (StepRunStart). Runs that
	// decide an approval outside a conversation (ResolveApproval) have
	// one with no Text.
	Message *Message
	// Call numbers the model calls of the run (1, 2, ...), so a request,
	// its response and a retry can be paired.
	Call int
	// Request is what a model call sends; its Messages and Tools refer to
	// the run's own (StepModelRequest; StepModelResponse sets Purpose).
	Request llm.Request
	// Response is the model's reply (StepModelResponse when it
	// succeeded).
	Response *llm.Response
	// Retry counts the retries of a model call (StepModelRetry: 1 for the
	// first); ErrorKind is the kind of the failure retried.
	Retry     int
	ErrorKind llm.ErrorKind
	// Delay is how long the run waits before the retry.
	Delay time.Duration
	// From and To name the model left and the model tried next
	// (StepModelFallback).
	From, To string
	// ToolCall is the call as the model made it; its arguments are as the
	// model wrote them (StepToolCall, StepToolResult).
	ToolCall llm.ToolCall
	// Record is the call's record as it is in Result.ToolCalls, with its
	// arguments summarised and secrets masked (StepToolResult).
	Record ToolCallRecord
	// Approval is the request raised (StepApprovalRaised).
	Approval *approval.Request
	// Decided is the decision (StepApprovalDecided).
	Decided Decided
	// Recalled are the items recalled, with their scores (StepRecall).
	Recalled []memory.Item
	// Text: the result the model reads (StepToolResult), a note
	// (StepNote), a summary (StepCompaction), a defence
	// (StepContextShortened), a refusal's reason (StepSpendRefused), an
	// injected text (StepInject).
	Text string
	// Count: messages folded (StepCompaction) or left
	// (StepContextShortened); the intervention (StepDoomLoop).
	Count int
	// Duration: of the model call, the tool call or the run.
	Duration time.Duration
	// Err is the failure of a model call, a tool call or the run, or the
	// SpendGuard's refusal.
	Err error
	// Result is the run's result (StepRunEnd).
	Result *Result
	// Path is set on the steps of a sub-agent (Config.SubAgents), a run
	// of its own (its RunID): the IDs of the spawn_agent calls from the
	// top run down to it. Nil for a top run's steps.
	Path []string
	// Skill is set on the steps of a specialist: the skill (Config.Skills)
	// its spawn_agent call named. "" otherwise.
	Skill string
	// Risk is the call's risk and RiskDecision what became of the call
	// (StepRisk).
	Risk         tool.Risk
	RiskDecision RiskDecision
}

// observing is the observer state of a run.
type observing struct {
	seq   int // steps so far
	calls int // model calls so far
	// late: the run's conversation is known only once its body has
	// begun (ResolveApproval), which then calls startStep; any step before
	// that starts the run first.
	late    bool
	started bool
	// ended is closed once StepRunEnd was given, with seq and calls
	// final: the run's fact extraction observes after it.
	ended *runEnded
}

// runEnded hands a run's step and call counts to its fact extraction.
type runEnded struct {
	done       chan struct{}
	seq, calls int
}

// startStep gives StepRunStart, once.
func (r *run) startStep() {
	if !r.obs.started {
		r.obs.started = true
		r.step(Step{Kind: StepRunStart, Message: &r.msg})
	}
}

// step gives s to the Observer with the run's identity and the next Seq.
// Callers check r.o.obs != nil first, so a run without an observer builds
// no Step.
func (r *run) step(s Step) {
	if !r.obs.started && s.Kind != StepRunStart {
		r.startStep()
	}
	r.obs.seq++
	s.Seq = r.obs.seq
	s.Time = r.o.now()
	s.RunID, s.TenantID, s.ConversationID = r.res.RunID, r.msg.TenantID, r.msg.ConversationID
	if r.sub != nil {
		s.Path, s.Skill = r.sub.path, r.sub.skill
	}
	r.o.observe(r.ctx, s)
}

// addParked notes an Agent-Tool the run parked in the pool (Result.Waiting);
// one that waits for approval is a StepApprovalRaised.
func (r *run) addParked(w Waiting) {
	r.parked = append(r.parked, w)
	if r.o.obs != nil && w.Approval != nil {
		r.step(Step{Kind: StepApprovalRaised, Approval: w.Approval})
	}
}

// observeExtraction gives s, a step of a run's fact extraction, after the
// run's StepRunEnd (waiting for it), as the run's next step and model
// call. It returns the time it was given.
func (o *Orchestrator) observeExtraction(ctx context.Context, x extraction, s Step) time.Time {
	e := x.ended
	select {
	case <-e.done:
	case <-ctx.Done():
		return time.Now()
	}
	if s.Kind == StepModelRequest {
		e.calls++
	}
	e.seq++
	s.Seq, s.Call, s.Time = e.seq, e.calls, o.now()
	s.RunID, s.TenantID, s.ConversationID = x.runID, x.tenant, x.conv
	o.observe(ctx, s)
	return time.Now()
}

// observerOf is obs, or nil when it is a typed nil (an *AsyncObserver set
// only when observing is on).
func observerOf(obs Observer) Observer {
	if isNil(obs) {
		return nil
	}
	return obs
}

// observe calls the Observer, containing a panic: the first is logged.
func (o *Orchestrator) observe(ctx context.Context, s Step) {
	defer func() {
		if v := recover(); v != nil {
			o.observerPanicked(ctx, s, v)
		}
	}()
	o.obs.Observe(ctx, s)
}

func (o *Orchestrator) observerPanicked(ctx context.Context, s Step, v any) {
	if o.obsPanicked.Swap(true) {
		return
	}
	o.log.ErrorContext(ctx, "agent: the Observer panicked; the run goes on (later panics are not logged)",
		logTenant, s.TenantID, logConversation, s.ConversationID, logRunID, s.RunID,
		"step", s.Kind.String(), "panic", maskText(fmt.Sprint(v)))
}
